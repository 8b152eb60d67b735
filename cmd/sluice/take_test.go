package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/stream"
)

func TestCatPositions(t *testing.T) {
	job := []string{"--shuffle", "--seed", "9", "--epoch", "1", "--world-size", "2", "--num-splits", "4", "--batch-size", "64", "--shuffle-window", "300"}
	all := catIDs(t, append([]string{dataDir, "--rank", "1"}, job...)...)
	pos := []int64{0, 17, 3, 4, 5, 6, int64(len(all) - 1), 17}
	got := catIDs(t, append([]string{dataDir, "--rank", "1", "--positions", "0,17,3-6", "--positions", fmt.Sprint(len(all)-1, ",17")}, job...)...)
	want := make([]int64, len(pos))
	for i, p := range pos {
		want[i] = all[p]
	}
	if !slices.Equal(got, want) {
		t.Errorf("cat --positions printed ids %v, the streamed order has %v there", got, want)
	}
	// One split's order: what the library delivers to the split's own rank
	// at world size 4.
	split := streamIDs(t, stream.Options{URLs: []string{dataDir}, Columns: []string{"id"}, Shuffle: true, Seed: 9, Epoch: 1, ShuffleWindow: 300, WorldSize: 4, Rank: 2, NumSplits: 4, BatchSize: 64}, 0, nil)
	got = catIDs(t, append([]string{dataDir, "--split", "2", "--positions", "10-12"}, job...)...)
	if !slices.Equal(got, split[10:13]) {
		t.Errorf("cat --split 2 --positions 10-12 printed ids %v, the split has %v", got, split[10:13])
	}
	n := len(all)
	fails(t, exitUsage, []string{"sluice: cat: ", fmt.Sprintf("%d is not in [0, %d)", n, n)}, append([]string{"cat", dataDir, "--rank", "1", "--positions", strconv.Itoa(n)}, job...)...)
	fails(t, exitUsage, []string{"sluice: cat: ", "--positions", "--checkpoint"}, "cat", dataDir, "--positions", "1", "--checkpoint", "x", "--run", "r")
	fails(t, exitUsage, []string{"sluice: cat: ", "--split needs --positions"}, "cat", dataDir, "--split", "1")
	fails(t, exitUsage, []string{"sluice: cat: ", "range"}, "cat", dataDir, "--positions", "9-3")
}

func TestLocateCommand(t *testing.T) {
	args := []string{"locate", dataDir, "--shuffle", "--seed", "3", "--num-splits", "3", "--positions", "0,500,2999", "--json"}
	out := ok(t, args...)
	ids := catIDs(t, dataDir, "--shuffle", "--seed", "3", "--num-splits", "3")
	var locs []stream.Location
	for line := range strings.Lines(out) {
		var l stream.Location
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		locs = append(locs, l)
	}
	if len(locs) != 3 {
		t.Fatalf("%d locations for 3 positions:\n%s", len(locs), out)
	}
	for _, l := range locs {
		// synth ids number the rows in file order.
		if id := int64(l.File)*int64(spec.RowsPerFile) + l.Row; id != ids[l.Position] {
			t.Errorf("position %d located at file %d row %d (id %d); cat prints id %d there", l.Position, l.File, l.Row, id, ids[l.Position])
		}
		if l.Unit != int(l.Row)/spec.RowGroupRows || l.UnitRow != l.Row%int64(spec.RowGroupRows) {
			t.Errorf("position %d: row %d said to be row group %d row %d", l.Position, l.Row, l.Unit, l.UnitRow)
		}
	}
	table := ok(t, "locate", dataDir, "--positions", "1")
	if !strings.Contains(table, "ROW GROUP") || !strings.Contains(table, "part-00000.parquet") {
		t.Errorf("locate table:\n%s", table)
	}
	fails(t, exitUsage, []string{"sluice: locate: ", "--positions is required"}, "locate", dataDir)
	fails(t, exitUsage, []string{"sluice: locate: ", "[0, 3000)"}, "locate", dataDir, "--positions", "3000")
}

func TestParsePositions(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int64
	}{
		{"0", []int64{0}},
		{"10,20,30", []int64{10, 20, 30}},
		{"5-7,1", []int64{5, 6, 7, 1}},
		{" 3 , 3 ", []int64{3, 3}},
	} {
		if got, err := parsePositions(c.in); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", ",", "a", "-1", "3-", "7-5", "1,,2", "0-99999999999"} {
		if got, err := parsePositions(bad); err == nil {
			t.Errorf("%q: %v, no error", bad, got)
		}
	}
}

func FuzzParsePositions(f *testing.F) {
	for _, s := range []string{"0", "10,20,30", "5-7,1", "7-5", "0-99999999999", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parsePositions(s)
		if err != nil {
			return
		}
		if len(got) == 0 || len(got) > maxPositions {
			t.Fatalf("%q: %d positions", s, len(got))
		}
		for _, p := range got {
			if p < 0 {
				t.Fatalf("%q: negative position %d", s, p)
			}
		}
	})
}
