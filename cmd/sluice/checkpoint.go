package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/pebblestore"
)

const checkpointHead = `Usage:
  sluice checkpoint ls   --run NAME [--json] STORE
  sluice checkpoint show --run NAME [--step N] [--json] STORE
  sluice checkpoint rm   --run NAME (--step N | --keep N) STORE

Looks into a checkpoint store: the states that the ranks of a training run
saved at its steps (stream.Checkpointer, or checkpoint.Store.Save).

STORE is the directory of a pebble store (pebblestore.Open), or the URL
of a bucket store (checkpoint.OpenBucketStoreURL) in any scheme sluice has a
driver for, such as file:///path or s3://bucket?region=us-east-1&prefix=ckpt/
(mem:// is accepted, but a new process's is empty). ls and show open a
pebble store read-only; pebble lets one process hold a store at a time, so
they fail with "store directory in use" while a job has it open.

--run is required: the store API lists the steps of a run, not the runs.

  ls    every step of the run: complete or not (and why not), world size,
        ranks stored, and for complete steps the epoch and rows taken
  show  one step: the order options and fingerprints the state carries,
        each rank's epoch and round-robin position, and each split's cursor
        (the shuffle window it is in, the rows of that window delivered,
        and the rows of the split delivered this epoch). Default: the
        newest complete step
  rm    delete one step (--step), or every step older than the newest
        --keep complete ones (steps newer than those are left alone)

A step, run or store that does not exist exits with status 3.

Flags:
`

type checkpointConfig struct {
	run  string
	step int64
	keep int
	json bool
}

func checkpointFlags(sub string) (*flag.FlagSet, *checkpointConfig) {
	cfg := &checkpointConfig{}
	fs := newFlagSet("checkpoint " + sub)
	fs.StringVar(&cfg.run, "run", "", "`name` of the run (required)")
	if sub != "ls" {
		fs.Int64Var(&cfg.step, "step", -1, "`step` to show or delete; for show, -1 is the newest complete step")
	}
	if sub == "rm" || sub == "" {
		fs.IntVar(&cfg.keep, "keep", 0, "rm: keep the newest `N` complete steps, delete the older ones")
	}
	if sub != "rm" {
		fs.BoolVar(&cfg.json, "json", false, "ls, show: print JSON instead of tables")
	}
	return fs, cfg
}

func checkpointUsage() string {
	fs, _ := checkpointFlags("")
	return checkpointHead + flagDefaults(fs) + `
Examples:
  sluice checkpoint ls --run exp1 ckpt/
  sluice checkpoint show --run exp1 ckpt/ --json
  sluice checkpoint show --run exp1 --step 2000 file:///mnt/shared/ckpt
  sluice checkpoint rm --run exp1 --keep 3 ckpt/
`
}

func runCheckpoint(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageErrorf("missing subcommand: ls, show or rm")
	}
	sub := args[0]
	switch sub {
	case "-h", "-help", "--help", "help":
		return flag.ErrHelp
	case "ls", "show", "rm":
	default:
		return usageErrorf("unknown subcommand %q: ls, show or rm", sub)
	}
	fs, cfg := checkpointFlags(sub)
	rest, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 0:
		return usageErrorf("%s: no STORE given (a pebble directory or a bucket URL)", sub)
	case len(rest) > 1:
		return usageErrorf("%s: one STORE expected, got %d arguments", sub, len(rest))
	case cfg.run == "":
		return usageErrorf("%s: --run is required (a store cannot list its runs)", sub)
	}
	if sub == "rm" {
		switch {
		case isSet(fs, "step") == isSet(fs, "keep"):
			return usageErrorf("rm: give exactly one of --step and --keep")
		case isSet(fs, "step") && cfg.step < 0:
			return usageErrorf("rm: --step %d must not be negative", cfg.step)
		case isSet(fs, "keep") && cfg.keep < 1:
			return usageErrorf("rm: --keep %d must be at least 1: a run must keep a step to resume from", cfg.keep)
		}
	}
	store, err := openStore(ctx, rest[0], sub != "rm")
	if err != nil {
		return err
	}
	defer store.Close()
	switch sub {
	case "ls":
		err = checkpointLs(ctx, e.stdout, store, cfg)
	case "show":
		err = checkpointShow(ctx, e.stdout, store, cfg)
	default:
		err = checkpointRm(ctx, e.stdout, store, cfg)
	}
	if cerr := store.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// openStore opens a bucket store for a URL and a pebble store for a path.
// A pebble store is never created here: a mistyped path must not become an
// empty store.
func openStore(ctx context.Context, where string, readOnly bool) (checkpoint.Store, error) {
	if strings.Contains(where, "://") {
		if u, err := url.Parse(where); err == nil && u.Scheme == "file" {
			// Without this a missing directory would read as a store with
			// no steps, and a typo would look like a lost run.
			if _, err := os.Stat(filepath.FromSlash(u.Path)); errors.Is(err, fs.ErrNotExist) {
				return nil, notFoundf("store %s does not exist", u.Path)
			}
		}
		return checkpoint.OpenBucketStoreURL(ctx, where)
	}
	if err := looksLikePebble(where); err != nil {
		return nil, err
	}
	return pebblestore.Open(where, pebblestore.Options{ErrorIfNotExists: true, ReadOnly: readOnly})
}

// looksLikePebble refuses a directory that holds no pebble store before
// pebblestore.Open locks it, since locking creates a LOCK file there: "sluice
// checkpoint ls data/" must leave data/ as it was.
func looksLikePebble(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return notFoundf("store %s does not exist", dir)
	}
	if err != nil {
		return fmt.Errorf("checkpoint store %s: %w", dir, err)
	}
	for _, de := range entries {
		if strings.HasPrefix(de.Name(), "MANIFEST-") || de.Name() == "CURRENT" {
			return nil
		}
	}
	return notFoundf("%s holds no checkpoint store (no pebble MANIFEST in it)", filepath.Clean(dir))
}

// stepView is one step as ls and show print it.
type stepView struct {
	Step       int64    `json:"step"`
	Complete   bool     `json:"complete"`
	Reason     string   `json:"reason,omitempty"`
	WorldSize  int      `json:"world_size"`
	Ranks      []int    `json:"ranks"`
	RankErrors []string `json:"rank_errors,omitempty"`
	// Epoch and RowsTaken are known for complete steps only.
	Epoch     *int64 `json:"epoch,omitempty"`
	RowsTaken *int64 `json:"rows_taken,omitempty"`
}

func checkpointLs(ctx context.Context, w io.Writer, store checkpoint.Store, cfg *checkpointConfig) error {
	infos, err := store.List(ctx, cfg.run)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		return notFoundf("run %q has no steps in this store", cfg.run)
	}
	views := make([]stepView, 0, len(infos))
	for _, info := range infos {
		v := newStepView(info)
		if info.Complete {
			// StepInfo does not carry the position, so a complete step is
			// read a second time for its epoch and rows.
			if st, err := store.LoadStep(ctx, cfg.run, info.Step); err == nil {
				epoch, rows := st.Epoch, rowsTaken(st)
				v.Epoch, v.RowsTaken = &epoch, &rows
			}
		}
		views = append(views, v)
	}
	if cfg.json {
		return writeJSON(w, views)
	}
	t := newTable(">STEP", "STATUS", ">WORLD", "RANKS", ">EPOCH", ">ROWS TAKEN", "NOTE")
	for _, v := range views {
		status, epoch, rows := "incomplete", "-", "-"
		if v.Complete {
			status = "complete"
		}
		if v.Epoch != nil {
			epoch, rows = strconv.FormatInt(*v.Epoch, 10), strconv.FormatInt(*v.RowsTaken, 10)
		}
		world := "-"
		if v.WorldSize > 0 {
			world = strconv.Itoa(v.WorldSize)
		}
		t.add(strconv.FormatInt(v.Step, 10), status, world, ranges(v.Ranks), epoch, rows, v.Reason)
	}
	return t.write(w)
}

func newStepView(info checkpoint.StepInfo) stepView {
	v := stepView{Step: info.Step, Complete: info.Complete, Reason: oneLine(info.Reason), WorldSize: info.WorldSize, Ranks: info.Ranks}
	if v.Ranks == nil {
		v.Ranks = []int{}
	}
	for _, r := range slices.Sorted(maps.Keys(info.RankErrors)) {
		v.RankErrors = append(v.RankErrors, fmt.Sprintf("rank %d: %s", r, oneLine(info.RankErrors[r])))
	}
	return v
}

// rowsTaken is what the consumers of every split a state speaks for have
// taken this epoch.
func rowsTaken(st checkpoint.State) int64 {
	var n int64
	for s, c := range st.Cursors {
		if st.Owns(s) {
			n += c.Rows
		}
	}
	return n
}

// showView is the document of checkpoint show --json.
type showView struct {
	Run string `json:"run"`
	stepView
	Latest        bool         `json:"latest"`
	NumSplits     int          `json:"num_splits"`
	Columns       []string     `json:"columns"`
	Seed          uint64       `json:"seed"`
	Shuffle       bool         `json:"shuffle"`
	ClumpSize     int          `json:"clump_size"`
	ShuffleWindow int          `json:"shuffle_window"`
	DropRemainder bool         `json:"drop_remainder"`
	Plan          string       `json:"plan"`
	Fingerprint   string       `json:"fingerprint"`
	Version       int          `json:"version"`
	RankStates    []rankView   `json:"rank_states"`
	Cursors       []cursorView `json:"cursors"`
}

type rankView struct {
	Rank  int    `json:"rank"`
	Epoch int64  `json:"epoch"`
	Next  int    `json:"next"`
	Rows  int64  `json:"rows"`
	Error string `json:"error,omitempty"`
}

type cursorView struct {
	Split int `json:"split"`
	Rank  int `json:"rank"`
	// Known is false for splits of a rank whose state is missing or
	// unreadable: their cursor is not in the store.
	Known  bool  `json:"known"`
	Window int   `json:"window"`
	Offset int64 `json:"offset"`
	Rows   int64 `json:"rows"`
}

func checkpointShow(ctx context.Context, w io.Writer, store checkpoint.Store, cfg *checkpointConfig) error {
	infos, err := store.List(ctx, cfg.run)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		return notFoundf("run %q has no steps in this store", cfg.run)
	}
	latest := cfg.step < 0
	step := cfg.step
	if latest {
		if step, err = store.Latest(ctx, cfg.run); err != nil {
			return err
		}
	}
	i := slices.IndexFunc(infos, func(in checkpoint.StepInfo) bool { return in.Step == step })
	if i < 0 {
		return notFoundf("run %q has no step %d (it has %s)", cfg.run, step, stepList(infos))
	}
	info := infos[i]
	v := showView{Run: cfg.run, stepView: newStepView(info), Latest: latest, RankStates: []rankView{}, Cursors: []cursorView{}}

	// Each rank's own state, since merging drops what is per rank (the
	// round-robin position) and an incomplete step cannot be merged at all.
	var states []checkpoint.State
	for _, r := range info.Ranks {
		st, err := store.Load(ctx, cfg.run, step, r)
		if err != nil {
			v.RankStates = append(v.RankStates, rankView{Rank: r, Error: oneLine(err.Error())})
			continue
		}
		states = append(states, st)
		v.RankStates = append(v.RankStates, rankView{Rank: r, Epoch: st.Epoch, Next: st.Next, Rows: rowsTaken(st)})
	}
	if len(states) > 0 {
		first := states[0]
		v.NumSplits, v.Columns, v.Seed, v.Shuffle = first.NumSplits, first.Columns, first.Seed, first.Shuffle
		v.ClumpSize, v.ShuffleWindow, v.DropRemainder = first.ClumpSize, first.ShuffleWindow, first.DropRemainder
		v.Plan, v.Fingerprint, v.Version = first.Plan, first.Fingerprint, first.Version
		if v.WorldSize == 0 {
			v.WorldSize = first.WorldSize
		}
		epoch, rows := first.Epoch, int64(0)
		for _, st := range states {
			rows += rowsTaken(st)
		}
		v.Epoch, v.RowsTaken = &epoch, &rows
		for s := range first.NumSplits {
			cv := cursorView{Split: s, Rank: -1}
			if v.WorldSize > 0 {
				cv.Rank = s % v.WorldSize
			}
			for _, st := range states {
				if st.Owns(s) && s < len(st.Cursors) {
					c := st.Cursors[s]
					cv.Known, cv.Window, cv.Offset, cv.Rows = true, c.Window, c.Offset, c.Rows
				}
			}
			v.Cursors = append(v.Cursors, cv)
		}
	}
	if cfg.json {
		return writeJSON(w, v)
	}
	return writeShow(w, &v)
}

func writeShow(w io.Writer, v *showView) error {
	which := ""
	if v.Latest {
		which = " (newest complete step)"
	}
	status := "complete"
	if !v.Complete {
		status = "incomplete (" + v.Reason + ")"
	}
	fmt.Fprintf(w, "run:             %s\n", v.Run)
	fmt.Fprintf(w, "step:            %d%s\n", v.Step, which)
	fmt.Fprintf(w, "status:          %s\n", status)
	fmt.Fprintf(w, "world size:      %d\n", v.WorldSize)
	fmt.Fprintf(w, "ranks stored:    %s\n", ranges(v.Ranks))
	if v.Epoch == nil {
		fmt.Fprintln(w, "no rank's state could be read")
		for _, e := range v.RankErrors {
			fmt.Fprintf(w, "  %s\n", e)
		}
		return nil
	}
	fmt.Fprintf(w, "epoch:           %d\n", *v.Epoch)
	fmt.Fprintf(w, "rows taken:      %d this epoch\n", *v.RowsTaken)
	fmt.Fprintf(w, "num splits:      %d\n", v.NumSplits)
	fmt.Fprintf(w, "columns:         %s\n", strings.Join(v.Columns, ", "))
	fmt.Fprintf(w, "shuffle:         %t (seed %d, clump size %d, window %d rows)\n", v.Shuffle, v.Seed, v.ClumpSize, v.ShuffleWindow)
	fmt.Fprintf(w, "drop remainder:  %t\n", v.DropRemainder)
	fmt.Fprintf(w, "plan:            %s\n", v.Plan)
	fmt.Fprintf(w, "fingerprint:     %s\n", v.Fingerprint)
	fmt.Fprintf(w, "state version:   %d\n\n", v.Version)

	head := []string{">RANK", ">EPOCH", ">NEXT", ">ROWS"}
	if slices.ContainsFunc(v.RankStates, func(r rankView) bool { return r.Error != "" }) {
		head = append(head, "ERROR")
	}
	ranks := newTable(head...)
	for _, r := range v.RankStates {
		if r.Error != "" {
			ranks.add(strconv.Itoa(r.Rank), "-", "-", "-", r.Error)
			continue
		}
		ranks.add(strconv.Itoa(r.Rank), strconv.FormatInt(r.Epoch, 10), strconv.Itoa(r.Next), strconv.FormatInt(r.Rows, 10))
	}
	ranks.write(w)
	fmt.Fprintln(w)
	cursors := newTable(">SPLIT", ">RANK", ">WINDOW", ">OFFSET", ">ROWS")
	for _, c := range v.Cursors {
		if !c.Known {
			cursors.add(strconv.Itoa(c.Split), strconv.Itoa(c.Rank), "-", "-", "-")
			continue
		}
		cursors.add(strconv.Itoa(c.Split), strconv.Itoa(c.Rank), strconv.Itoa(c.Window), strconv.FormatInt(c.Offset, 10), strconv.FormatInt(c.Rows, 10))
	}
	return cursors.write(w)
}

func checkpointRm(ctx context.Context, w io.Writer, store checkpoint.Store, cfg *checkpointConfig) error {
	before, err := store.List(ctx, cfg.run)
	if err != nil {
		return err
	}
	if len(before) == 0 {
		return notFoundf("run %q has no steps in this store", cfg.run)
	}
	if cfg.keep == 0 {
		if !slices.ContainsFunc(before, func(in checkpoint.StepInfo) bool { return in.Step == cfg.step }) {
			return notFoundf("run %q has no step %d (it has %s)", cfg.run, cfg.step, stepList(before))
		}
		if err := store.Delete(ctx, cfg.run, cfg.step); err != nil {
			return err
		}
		fmt.Fprintf(w, "deleted step %d of run %q\n", cfg.step, cfg.run)
		return nil
	}
	if err := store.Retain(ctx, cfg.run, cfg.keep); err != nil {
		return err
	}
	after, err := store.List(ctx, cfg.run)
	if err != nil {
		return err
	}
	kept := map[int64]bool{}
	for _, in := range after {
		kept[in.Step] = true
	}
	var deleted []int64
	for _, in := range before {
		if !kept[in.Step] {
			deleted = append(deleted, in.Step)
		}
	}
	if len(deleted) == 0 {
		fmt.Fprintf(w, "nothing to delete in run %q: kept %s\n", cfg.run, stepList(after))
		return nil
	}
	fmt.Fprintf(w, "deleted %s of run %q; kept %s\n", plural(len(deleted), "step", "steps")+" "+joinInt64s(deleted), cfg.run, stepList(after))
	return nil
}

func stepList(infos []checkpoint.StepInfo) string {
	if len(infos) == 0 {
		return "no steps"
	}
	steps := make([]int64, len(infos))
	for i, in := range infos {
		steps[i] = in.Step
	}
	return plural(len(steps), "step", "steps") + " " + joinInt64s(steps)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func joinInt64s(xs []int64) string {
	const most = 20
	parts := make([]string, 0, min(len(xs), most+1))
	for i, x := range xs {
		if i == most {
			parts = append(parts, fmt.Sprintf("… (%d in all)", len(xs)))
			break
		}
		parts = append(parts, strconv.FormatInt(x, 10))
	}
	return strings.Join(parts, ", ")
}

// ranges writes ascending ranks compactly: 0-7,9.
func ranges(xs []int) string {
	if len(xs) == 0 {
		return "-"
	}
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		} else {
			parts = append(parts, strconv.Itoa(xs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
