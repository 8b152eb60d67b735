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
saved at its steps (stream.Checkpointer, or checkpoint.Store.Save), or a
mix's states (stream.MixCheckpointer), told apart by what the run holds.

STORE is the directory of a pebble store (pebblestore.Open), or the URL
of a bucket store (checkpoint.OpenBucketStoreURL) in any scheme sluice has a
driver for, such as file:///path or s3://bucket?region=us-east-1&prefix=ckpt/
(mem:// is accepted, but a new process's is empty). ls and show open a
pebble store read-only; pebble lets one process hold a store at a time, so
they fail with "store directory in use" while a job has it open.

--run is required: the store API lists the steps of a run, not the runs.

  ls    every step of the run: complete or not (and why not), world size,
        ranks stored, and for complete steps the epoch and rows taken
        (an epoch such as 3-4 where ranks saved at an epoch's boundary)
  show  one step: the order options and fingerprints the state carries,
        the incarnation (start of the job) that saved it, each rank's epoch
        and round-robin position, and each split's epoch and cursor (the
        shuffle window it is in, the rows of that window delivered, and the
        rows of the split delivered in its epoch); for a mix, each mixed
        split's rows delivered and each source's rows taken since the mix
        began. Default: the newest complete step
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
	mix, err := mixRun(ctx, store, cfg.run)
	if err != nil {
		return err
	}
	switch {
	case sub == "ls" && mix != nil:
		err = checkpointLsMix(ctx, e.stdout, mix, cfg)
	case sub == "ls":
		err = checkpointLs(ctx, e.stdout, store, cfg)
	case sub == "show" && mix != nil:
		err = checkpointShowMix(ctx, e.stdout, mix, cfg)
	case sub == "show":
		err = checkpointShow(ctx, e.stdout, store, cfg)
	default:
		err = checkpointRm(ctx, e.stdout, store, mix, cfg)
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

// mixRun returns the store as a checkpoint.MixStore if run holds a mix's
// states (stream.MixCheckpointer's), and nil if it holds a dataset's: the
// newest step's lowest rank is read as either. A run whose states read as
// neither is shown as a dataset's, with each state's error.
func mixRun(ctx context.Context, store checkpoint.Store, run string) (checkpoint.MixStore, error) {
	ms, ok := store.(checkpoint.MixStore)
	if !ok {
		return nil, nil
	}
	infos, err := store.List(ctx, run)
	if err != nil {
		return nil, err
	}
	for _, info := range slices.Backward(infos) {
		if len(info.Ranks) == 0 {
			continue
		}
		if _, err := store.Load(ctx, run, info.Step, info.Ranks[0]); err == nil {
			return nil, nil
		}
		if _, err := ms.LoadMix(ctx, run, info.Step, info.Ranks[0]); err == nil {
			return ms, nil
		}
	}
	return nil, nil
}

// stepView is one step as ls and show print it.
type stepView struct {
	Step        int64    `json:"step"`
	Kind        string   `json:"kind"` // "dataset" or "mix"
	Complete    bool     `json:"complete"`
	Reason      string   `json:"reason,omitempty"`
	WorldSize   int      `json:"world_size"`
	Ranks       []int    `json:"ranks"`
	Incarnation string   `json:"incarnation,omitempty"`
	RankErrors  []string `json:"rank_errors,omitempty"`
	// Epoch and RowsTaken are known for complete steps only. Epoch is the
	// least of the splits' epochs; LastEpoch, the greatest, is there where
	// they differ (ranks saved at an epoch's boundary).
	Epoch     *int64 `json:"epoch,omitempty"`
	LastEpoch *int64 `json:"last_epoch,omitempty"`
	RowsTaken *int64 `json:"rows_taken,omitempty"`
}

// setEpochs fills Epoch and LastEpoch from a state's split epochs.
func (v *stepView) setEpochs(epoch int64, epochs []int64) {
	v.Epoch = &epoch
	if len(epochs) > 0 {
		if last := slices.Max(epochs); last != epoch {
			v.LastEpoch = &last
		}
	}
}

// epochText is the epoch as ls prints it: "3", or "3-4" where splits
// differ.
func (v *stepView) epochText() string {
	if v.Epoch == nil {
		return "-"
	}
	if v.LastEpoch != nil {
		return fmt.Sprintf("%d-%d", *v.Epoch, *v.LastEpoch)
	}
	return strconv.FormatInt(*v.Epoch, 10)
}

func checkpointLs(ctx context.Context, w io.Writer, store checkpoint.Store, cfg *checkpointConfig) error {
	infos, err := store.List(ctx, cfg.run)
	if err != nil {
		return err
	}
	if len(infos) == 0 {
		return notFoundf("run %q has no steps in this store", cfg.run)
	}
	return writeLs(w, datasetSteps(store).views(ctx, cfg.run, infos), cfg)
}

// checkpointLsMix is ls for a mix's run.
func checkpointLsMix(ctx context.Context, w io.Writer, ms checkpoint.MixStore, cfg *checkpointConfig) error {
	infos, err := ms.ListMix(ctx, cfg.run)
	if err != nil {
		return err
	}
	return writeLs(w, mixSteps(ms).views(ctx, cfg.run, infos), cfg)
}

// runSteps reads the steps of a run for ls and show the same way whether
// the run is a dataset's (S is checkpoint.State) or a mix's
// (checkpoint.MixState).
type runSteps[S any] struct {
	kind     string // stepView.Kind
	latest   func(ctx context.Context, run string) (int64, error)
	load     func(ctx context.Context, run string, step int64, rank int) (S, error)
	loadStep func(ctx context.Context, run string, step int64) (S, error)
	// rank is what show says of a rank's state (its Rank left to fill).
	rank func(S) rankView
	// epochs are a state's epoch and its splits'.
	epochs func(S) (int64, []int64)
}

func datasetSteps(store checkpoint.Store) runSteps[checkpoint.State] {
	return runSteps[checkpoint.State]{
		kind: "dataset", latest: store.Latest, load: store.Load, loadStep: store.LoadStep,
		rank: func(st checkpoint.State) rankView {
			return rankView{Epoch: st.Epoch, Next: st.Next, Rows: rowsTaken(st)}
		},
		epochs: func(st checkpoint.State) (int64, []int64) { return st.Epoch, st.Epochs },
	}
}

func mixSteps(ms checkpoint.MixStore) runSteps[checkpoint.MixState] {
	return runSteps[checkpoint.MixState]{
		kind: "mix", latest: ms.LatestMix, load: ms.LoadMix, loadStep: ms.LoadMixStep,
		rank: func(st checkpoint.MixState) rankView {
			return rankView{Epoch: st.Epoch, Next: st.Next, Rows: mixRowsTaken(st)}
		},
		epochs: func(st checkpoint.MixState) (int64, []int64) { return st.Epoch, st.Epochs },
	}
}

// views are ls's views of a run's steps.
func (r runSteps[S]) views(ctx context.Context, run string, infos []checkpoint.StepInfo) []stepView {
	views := make([]stepView, 0, len(infos))
	for _, info := range infos {
		v := newStepView(info, r.kind)
		if info.Complete {
			// StepInfo does not carry the position, so a complete step is
			// read a second time for its epoch and rows.
			if st, err := r.loadStep(ctx, run, info.Step); err == nil {
				rows := r.rank(st).Rows
				v.setEpochs(r.epochs(st))
				v.RowsTaken = &rows
			}
		}
		views = append(views, v)
	}
	return views
}

// step is the step show shows: cfg.step, or the newest complete one
// (latest) where it is negative.
func (r runSteps[S]) step(ctx context.Context, cfg *checkpointConfig, infos []checkpoint.StepInfo) (_ checkpoint.StepInfo, latest bool, _ error) {
	latest = cfg.step < 0
	step := cfg.step
	if latest {
		var err error
		if step, err = r.latest(ctx, cfg.run); err != nil {
			return checkpoint.StepInfo{}, latest, err
		}
	}
	i := slices.IndexFunc(infos, func(in checkpoint.StepInfo) bool { return in.Step == step })
	if i < 0 {
		return checkpoint.StepInfo{}, latest, notFoundf("run %q has no step %d (it has %s)", cfg.run, step, stepList(infos))
	}
	return infos[i], latest, nil
}

// ranks reads each rank's own state of a step, since merging drops what is
// per rank (the round-robin position) and an incomplete step cannot be
// merged at all: the states read, and what show says of every rank.
func (r runSteps[S]) ranks(ctx context.Context, run string, step int64, ranks []int) ([]S, []rankView) {
	var states []S
	views := []rankView{}
	for _, rank := range ranks {
		st, err := r.load(ctx, run, step, rank)
		if err != nil {
			views = append(views, rankView{Rank: rank, Error: oneLine(err.Error())})
			continue
		}
		states = append(states, st)
		rv := r.rank(st)
		rv.Rank = rank
		views = append(views, rv)
	}
	return states, views
}

// setPosition fills v's epoch (the least of the ranks', which a resumed
// job starts at; splitEpochs are the splits') and the rows the states'
// ranks have taken.
func (r runSteps[S]) setPosition(v *stepView, states []S, splitEpochs []int64) {
	var rows int64
	epoch, _ := r.epochs(states[0])
	for _, st := range states {
		rows += r.rank(st).Rows
		e, _ := r.epochs(st)
		epoch = min(epoch, e)
	}
	v.setEpochs(epoch, splitEpochs)
	v.RowsTaken = &rows
}

func writeLs(w io.Writer, views []stepView, cfg *checkpointConfig) error {
	if cfg.json {
		return writeJSON(w, views)
	}
	t := newTable(">STEP", "STATUS", ">WORLD", "RANKS", ">EPOCH", ">ROWS TAKEN", "NOTE")
	for _, v := range views {
		status, rows := "incomplete", "-"
		if v.Complete {
			status = "complete"
		}
		if v.Kind == "mix" {
			status += " mix"
		}
		if v.RowsTaken != nil {
			rows = strconv.FormatInt(*v.RowsTaken, 10)
		}
		world := "-"
		if v.WorldSize > 0 {
			world = strconv.Itoa(v.WorldSize)
		}
		t.add(strconv.FormatInt(v.Step, 10), status, world, ranges(v.Ranks), v.epochText(), rows, v.Reason)
	}
	return t.write(w)
}

func newStepView(info checkpoint.StepInfo, kind string) stepView {
	v := stepView{Step: info.Step, Kind: kind, Complete: info.Complete, Reason: oneLine(info.Reason), WorldSize: info.WorldSize, Ranks: info.Ranks, Incarnation: info.Incarnation}
	if v.Ranks == nil {
		v.Ranks = []int{}
	}
	for _, r := range slices.Sorted(maps.Keys(info.RankErrors)) {
		v.RankErrors = append(v.RankErrors, fmt.Sprintf("rank %d: %s", r, oneLine(info.RankErrors[r])))
	}
	return v
}

// rowsTaken is what the consumers of every split a state speaks for have
// taken, each split in its epoch.
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
	Epoch  int64 `json:"epoch"`
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
	steps := datasetSteps(store)
	info, latest, err := steps.step(ctx, cfg, infos)
	if err != nil {
		return err
	}
	v := showView{Run: cfg.run, stepView: newStepView(info, "dataset"), Latest: latest, Cursors: []cursorView{}}
	states, ranks := steps.ranks(ctx, cfg.run, info.Step, info.Ranks)
	v.RankStates = ranks
	if len(states) > 0 {
		first := states[0]
		v.NumSplits, v.Columns, v.Seed, v.Shuffle = first.NumSplits, first.Columns, first.Seed, first.Shuffle
		v.ClumpSize, v.ShuffleWindow, v.DropRemainder = first.ClumpSize, first.ShuffleWindow, first.DropRemainder
		v.Plan, v.Fingerprint, v.Version = first.Plan, first.Fingerprint, first.Version
		if v.WorldSize == 0 {
			v.WorldSize = first.WorldSize
		}
		if v.Incarnation == "" {
			v.Incarnation = first.Incarnation
		}
		var epochs []int64
		for s := range first.NumSplits {
			cv := cursorView{Split: s, Rank: -1}
			if v.WorldSize > 0 {
				cv.Rank = s % v.WorldSize
			}
			for _, st := range states {
				if st.Owns(s) && s < len(st.Cursors) {
					c := st.Cursors[s]
					cv.Known, cv.Epoch, cv.Window, cv.Offset, cv.Rows = true, st.SplitEpoch(s), c.Window, c.Offset, c.Rows
					epochs = append(epochs, cv.Epoch)
				}
			}
			v.Cursors = append(v.Cursors, cv)
		}
		steps.setPosition(&v.stepView, states, epochs)
	}
	if cfg.json {
		return writeJSON(w, v)
	}
	return writeShow(w, &v)
}

// writeStepHead writes what show says of any step, a dataset's or a mix's:
// the run, the step and its status, the ranks stored, and the epoch and rows
// where a state could be read (it returns false where none could).
func writeStepHead(w io.Writer, run string, latest bool, v *stepView) bool {
	which, status := "", "complete"
	if latest {
		which = " (newest complete step)"
	}
	if !v.Complete {
		status = "incomplete (" + v.Reason + ")"
	}
	fmt.Fprintf(w, "run:             %s\n", run)
	fmt.Fprintf(w, "step:            %d%s\n", v.Step, which)
	fmt.Fprintf(w, "status:          %s\n", status)
	fmt.Fprintf(w, "world size:      %d\n", v.WorldSize)
	fmt.Fprintf(w, "ranks stored:    %s\n", ranges(v.Ranks))
	if v.Epoch == nil {
		fmt.Fprintln(w, "no rank's state could be read")
		for _, e := range v.RankErrors {
			fmt.Fprintf(w, "  %s\n", e)
		}
		return false
	}
	writeEpochAndRows(w, v)
	return true
}

func writeShow(w io.Writer, v *showView) error {
	if !writeStepHead(w, v.Run, v.Latest, &v.stepView) {
		return nil
	}
	fmt.Fprintf(w, "num splits:      %d\n", v.NumSplits)
	fmt.Fprintf(w, "columns:         %s\n", strings.Join(v.Columns, ", "))
	fmt.Fprintf(w, "shuffle:         %t (seed %d, clump size %d, window %d rows)\n", v.Shuffle, v.Seed, v.ClumpSize, v.ShuffleWindow)
	fmt.Fprintf(w, "drop remainder:  %t\n", v.DropRemainder)
	fmt.Fprintf(w, "plan:            %s\n", v.Plan)
	fmt.Fprintf(w, "fingerprint:     %s\n", v.Fingerprint)
	fmt.Fprintf(w, "state version:   %d\n\n", v.Version)

	writeRanks(w, v.RankStates)
	fmt.Fprintln(w)
	cursors := newTable(">SPLIT", ">RANK", ">EPOCH", ">WINDOW", ">OFFSET", ">ROWS")
	for _, c := range v.Cursors {
		if !c.Known {
			cursors.add(strconv.Itoa(c.Split), strconv.Itoa(c.Rank), "-", "-", "-", "-")
			continue
		}
		cursors.add(strconv.Itoa(c.Split), strconv.Itoa(c.Rank), strconv.FormatInt(c.Epoch, 10), strconv.Itoa(c.Window), strconv.FormatInt(c.Offset, 10), strconv.FormatInt(c.Rows, 10))
	}
	return cursors.write(w)
}

// writeEpochAndRows writes show's epoch, rows taken and incarnation lines.
func writeEpochAndRows(w io.Writer, v *stepView) {
	if v.LastEpoch != nil {
		fmt.Fprintf(w, "epoch:           %s (ranks saved at an epoch's boundary: each split resumes in its own)\n", v.epochText())
		fmt.Fprintf(w, "rows taken:      %d, each split's in its epoch\n", *v.RowsTaken)
	} else {
		fmt.Fprintf(w, "epoch:           %d\n", *v.Epoch)
		fmt.Fprintf(w, "rows taken:      %d this epoch\n", *v.RowsTaken)
	}
	inc := v.Incarnation
	if inc == "" {
		inc = "none (saved without one)"
	}
	fmt.Fprintf(w, "incarnation:     %s\n", inc)
}

// mixRowsTaken is the rows the consumers of every mixed split a mix state
// speaks for have taken, each split in its epoch.
func mixRowsTaken(st checkpoint.MixState) int64 {
	var n int64
	for s, c := range st.Cursors {
		if st.Owns(s) {
			n += c
		}
	}
	return n
}

// mixShowView is the document of checkpoint show --json for a mix's run.
type mixShowView struct {
	Run string `json:"run"`
	stepView
	Latest      bool           `json:"latest"`
	NumSplits   int            `json:"num_splits"`
	Sources     int            `json:"sources"`
	Fingerprint string         `json:"fingerprint"`
	Version     int            `json:"version"`
	RankStates  []rankView     `json:"rank_states"`
	Splits      []mixSplitView `json:"splits"`
}

// mixSplitView is one mixed split's position: the rows of it delivered in
// its epoch, and per source the rows of that source's split the mix has
// taken since it began.
type mixSplitView struct {
	Split int     `json:"split"`
	Rank  int     `json:"rank"`
	Known bool    `json:"known"`
	Epoch int64   `json:"epoch"`
	Rows  int64   `json:"rows"`
	Taken []int64 `json:"taken"`
}

// checkpointShowMix is show for a mix's run.
func checkpointShowMix(ctx context.Context, w io.Writer, ms checkpoint.MixStore, cfg *checkpointConfig) error {
	infos, err := ms.ListMix(ctx, cfg.run)
	if err != nil {
		return err
	}
	steps := mixSteps(ms)
	info, latest, err := steps.step(ctx, cfg, infos)
	if err != nil {
		return err
	}
	v := mixShowView{Run: cfg.run, stepView: newStepView(info, "mix"), Latest: latest, Splits: []mixSplitView{}}
	states, ranks := steps.ranks(ctx, cfg.run, info.Step, info.Ranks)
	v.RankStates = ranks
	if len(states) > 0 {
		first := states[0]
		v.NumSplits, v.Sources, v.Fingerprint, v.Version = first.NumSplits, len(first.Taken), first.Fingerprint, first.Version
		if v.WorldSize == 0 {
			v.WorldSize = first.WorldSize
		}
		if v.Incarnation == "" {
			v.Incarnation = first.Incarnation
		}
		var epochs []int64
		for s := range first.NumSplits {
			sv := mixSplitView{Split: s, Rank: -1, Taken: []int64{}}
			if v.WorldSize > 0 {
				sv.Rank = s % v.WorldSize
			}
			for _, st := range states {
				if st.Owns(s) {
					sv.Known, sv.Epoch, sv.Rows = true, st.SplitEpoch(s), st.Cursors[s]
					for _, t := range st.Taken {
						sv.Taken = append(sv.Taken, t[s])
					}
					epochs = append(epochs, sv.Epoch)
				}
			}
			v.Splits = append(v.Splits, sv)
		}
		steps.setPosition(&v.stepView, states, epochs)
	}
	if cfg.json {
		return writeJSON(w, v)
	}
	if !writeStepHead(w, v.Run+" (a mix's: stream.MixCheckpointer)", v.Latest, &v.stepView) {
		return nil
	}
	fmt.Fprintf(w, "num splits:      %d\n", v.NumSplits)
	fmt.Fprintf(w, "sources:         %d\n", v.Sources)
	fmt.Fprintf(w, "fingerprint:     %s\n", v.Fingerprint)
	fmt.Fprintf(w, "state version:   %d\n\n", v.Version)
	writeRanks(w, v.RankStates)
	fmt.Fprintln(w)
	head := []string{">SPLIT", ">RANK", ">EPOCH", ">ROWS"}
	for k := range v.Sources {
		head = append(head, fmt.Sprintf(">SOURCE %d TAKEN", k))
	}
	t := newTable(head...)
	for _, sv := range v.Splits {
		row := []string{strconv.Itoa(sv.Split), strconv.Itoa(sv.Rank), "-", "-"}
		if sv.Known {
			row[2], row[3] = strconv.FormatInt(sv.Epoch, 10), strconv.FormatInt(sv.Rows, 10)
		}
		for k := range v.Sources {
			cell := "-"
			if k < len(sv.Taken) {
				cell = strconv.FormatInt(sv.Taken[k], 10)
			}
			row = append(row, cell)
		}
		t.add(row...)
	}
	return t.write(w)
}

// writeRanks writes show's table of the ranks' states.
func writeRanks(w io.Writer, states []rankView) {
	head := []string{">RANK", ">EPOCH", ">NEXT", ">ROWS"}
	if slices.ContainsFunc(states, func(r rankView) bool { return r.Error != "" }) {
		head = append(head, "ERROR")
	}
	ranks := newTable(head...)
	for _, r := range states {
		if r.Error != "" {
			ranks.add(strconv.Itoa(r.Rank), "-", "-", "-", r.Error)
			continue
		}
		ranks.add(strconv.Itoa(r.Rank), strconv.FormatInt(r.Epoch, 10), strconv.Itoa(r.Next), strconv.FormatInt(r.Rows, 10))
	}
	ranks.write(w)
}

func checkpointRm(ctx context.Context, w io.Writer, store checkpoint.Store, mix checkpoint.MixStore, cfg *checkpointConfig) error {
	list, retain := store.List, store.Retain
	if mix != nil {
		list, retain = mix.ListMix, mix.RetainMix
	}
	before, err := list(ctx, cfg.run)
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
	if err := retain(ctx, cfg.run, cfg.keep); err != nil {
		return err
	}
	after, err := list(ctx, cfg.run)
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
