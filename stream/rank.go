package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicedata/sluice/checkpoint"
)

// ErrNoLauncher is returned by RankFromEnv when no launcher's variables are
// set: the process was started on its own. A caller that also runs as a
// single process tests for it and uses rank 0 of 1.
var ErrNoLauncher = errors.New("stream: no launcher environment (torchrun, Slurm, Open MPI or a Kubernetes indexed Job) found")

// Placement is where a launcher placed this process in its job.
type Placement struct {
	// Launcher names the convention the values came from: "torchrun",
	// "slurm", "openmpi" or "kubernetes".
	Launcher string
	// Rank and WorldSize are the process's rank in the job and the job's
	// number of processes: Options.Rank and Options.WorldSize.
	Rank, WorldSize int
	// LocalRank and LocalWorldSize are the process's rank among the job's
	// processes on its machine and their number, or -1 where the launcher
	// does not say (a Kubernetes pod is a machine of its own: 0 and 1).
	LocalRank, LocalWorldSize int
	// Incarnation is the launcher's name for this start of the job, the
	// same on every rank of it and new when the launcher restarts the job:
	// what Checkpointer.Incarnation wants. From torchrun, TORCHELASTIC_RUN_ID
	// and TORCHELASTIC_RESTART_COUNT (a restart after a failure counts up;
	// a new torchrun with the default run id "none" starts at 0 again, so
	// give each submission its own --rdzv-id); from Slurm, SLURM_JOB_ID,
	// SLURM_STEP_ID and SLURM_RESTART_COUNT (a requeue counts up); from
	// Open MPI, OMPI_MCA_ess_base_jobid. "" where the launcher names no
	// start (a Kubernetes indexed Job): then make one on rank 0
	// (NewIncarnation) and broadcast it.
	Incarnation string
}

// LaunchOptions adjust RankFromEnv. The zero value reads every convention.
type LaunchOptions struct {
	// WorldSize is the job's number of processes where the launcher does
	// not say it: a Kubernetes indexed Job sets only JOB_COMPLETION_INDEX,
	// and its world size is the Job's completions. Where a launcher does
	// say it, the two must agree. Default 0: not given.
	WorldSize int
	// Launcher, if set, reads only that convention ("torchrun", "slurm",
	// "openmpi", "kubernetes") and ignores the others' variables: torchrun
	// started inside a Slurm allocation sees both, with different ranks.
	// Default "": every convention, and they must agree.
	Launcher string
	// Getenv looks up a variable. Default os.LookupEnv.
	Getenv func(string) (string, bool)
}

// convention is one launcher's variables. Local variables are optional.
type convention struct {
	name              string
	rank, world       string // world "" means the world size is given
	localRank, localW string
	// start names this start of the job: the first variable is required
	// for an incarnation, the others default to "0".
	start []string
}

var conventions = []convention{
	{name: "torchrun", rank: "RANK", world: "WORLD_SIZE", localRank: "LOCAL_RANK", localW: "LOCAL_WORLD_SIZE",
		start: []string{"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"}},
	{name: "slurm", rank: "SLURM_PROCID", world: "SLURM_NTASKS", localRank: "SLURM_LOCALID",
		start: []string{"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_RESTART_COUNT"}},
	{name: "openmpi", rank: "OMPI_COMM_WORLD_RANK", world: "OMPI_COMM_WORLD_SIZE", localRank: "OMPI_COMM_WORLD_LOCAL_RANK", localW: "OMPI_COMM_WORLD_LOCAL_SIZE",
		start: []string{"OMPI_MCA_ess_base_jobid"}},
	{name: "kubernetes", rank: "JOB_COMPLETION_INDEX"},
}

// RankFromEnv reads the process's rank and world size from the variables
// its launcher set:
//
//	torchrun            RANK, WORLD_SIZE (LOCAL_RANK, LOCAL_WORLD_SIZE)
//	Slurm (srun)        SLURM_PROCID, SLURM_NTASKS (SLURM_LOCALID)
//	Open MPI (mpirun)   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
//	                    (OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE)
//	Kubernetes          JOB_COMPLETION_INDEX, with LaunchOptions.WorldSize
//
// A convention with some of its variables but not all, a value that is not
// a number or a rank outside its world, and two conventions that disagree
// are errors naming the variables. No convention at all is ErrNoLauncher.
// Open never reads the environment: a caller passes what this returns.
func RankFromEnv(o LaunchOptions) (Placement, error) {
	get := o.Getenv
	if get == nil {
		get = os.LookupEnv
	}
	if o.WorldSize < 0 {
		return Placement{}, fmt.Errorf("stream: LaunchOptions.WorldSize %d must not be negative", o.WorldSize)
	}
	convs := conventions
	if o.Launcher != "" {
		i := slices.IndexFunc(conventions, func(c convention) bool { return c.name == o.Launcher })
		if i < 0 {
			return Placement{}, fmt.Errorf("stream: LaunchOptions.Launcher %q is none of torchrun, slurm, openmpi, kubernetes", o.Launcher)
		}
		convs = conventions[i : i+1]
	}
	var found []Placement
	var sources []string // the variables each found placement came from
	for _, c := range convs {
		p, vars, ok, err := c.read(get, o.WorldSize)
		if err != nil {
			return Placement{}, err
		}
		if ok {
			found = append(found, p)
			sources = append(sources, vars)
		}
	}
	if len(found) == 0 {
		if o.Launcher != "" {
			return Placement{}, fmt.Errorf("%w: %s's %s is not set", ErrNoLauncher, convs[0].name, convs[0].rank)
		}
		return Placement{}, ErrNoLauncher
	}
	p := found[0]
	for i, q := range found[1:] {
		if q.Rank != p.Rank || q.WorldSize != p.WorldSize {
			return Placement{}, fmt.Errorf("stream: launcher environments disagree: %s says rank %d of %d, %s says rank %d of %d (set LaunchOptions.Launcher to pick one)",
				sources[0], p.Rank, p.WorldSize, sources[i+1], q.Rank, q.WorldSize)
		}
		// Agreeing conventions (srun starting Open MPI ranks sets both):
		// the first says the local figures, or the next where it cannot.
		if p.LocalRank < 0 {
			p.LocalRank = q.LocalRank
		}
		if p.LocalWorldSize < 0 {
			p.LocalWorldSize = q.LocalWorldSize
		}
	}
	if o.WorldSize > 0 && o.WorldSize != p.WorldSize {
		return Placement{}, fmt.Errorf("stream: %s says world size %d, LaunchOptions.WorldSize is %d", sources[0], p.WorldSize, o.WorldSize)
	}
	return p, nil
}

// read reads one convention: ok is false when none of its variables is
// set; vars describes where the values came from, for errors.
func (c convention) read(get func(string) (string, bool), given int) (p Placement, vars string, ok bool, err error) {
	names := []string{c.rank, c.world, c.localRank, c.localW}
	var set []string
	for _, n := range names {
		if _, present := get(n); n != "" && present {
			set = append(set, n)
		}
	}
	if len(set) == 0 {
		return p, "", false, nil
	}
	_, hasRank := get(c.rank)
	hasWorld := true
	if c.world != "" {
		_, hasWorld = get(c.world)
	}
	if !hasRank || !hasWorld {
		return p, "", false, fmt.Errorf("stream: %s environment is partial: %s set but %s not", c.name, strings.Join(set, ", "), strings.Join(missing(c, get), ", "))
	}
	num := func(name string, min int) (int, error) {
		v, _ := get(name)
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < min {
			return 0, fmt.Errorf("stream: %s environment: %s=%q is not a number of at least %d", c.name, name, v, min)
		}
		return n, nil
	}
	p = Placement{Launcher: c.name, LocalRank: -1, LocalWorldSize: -1}
	if p.Rank, err = num(c.rank, 0); err != nil {
		return p, "", false, err
	}
	vars = c.rank
	if c.world == "" {
		if given == 0 {
			return p, "", false, fmt.Errorf("stream: %s environment: %s is set but the world size is not given (LaunchOptions.WorldSize: the Job's completions; or LaunchOptions.Launcher, where another launcher such as torchrun runs inside the Job's pods)", c.name, c.rank)
		}
		p.WorldSize = given
		p.LocalRank, p.LocalWorldSize = 0, 1
	} else {
		if p.WorldSize, err = num(c.world, 1); err != nil {
			return p, "", false, err
		}
		vars += "/" + c.world
	}
	if p.Rank >= p.WorldSize {
		return p, "", false, fmt.Errorf("stream: %s environment: rank %d (%s) is outside world size %d", c.name, p.Rank, c.rank, p.WorldSize)
	}
	if c.localRank != "" && slices.Contains(set, c.localRank) {
		if p.LocalRank, err = num(c.localRank, 0); err != nil {
			return p, "", false, err
		}
	}
	if c.localW != "" && slices.Contains(set, c.localW) {
		if p.LocalWorldSize, err = num(c.localW, 1); err != nil {
			return p, "", false, err
		}
	}
	if p.LocalRank >= 0 && p.LocalWorldSize > 0 && p.LocalRank >= p.LocalWorldSize {
		return p, "", false, fmt.Errorf("stream: %s environment: local rank %d (%s) is outside local world size %d (%s)", c.name, p.LocalRank, c.localRank, p.LocalWorldSize, c.localW)
	}
	if p.LocalWorldSize > p.WorldSize {
		return p, "", false, fmt.Errorf("stream: %s environment: local world size %d (%s) is more than world size %d", c.name, p.LocalWorldSize, c.localW, p.WorldSize)
	}
	p.Incarnation = c.incarnation(get)
	return p, c.name + " " + vars, true, nil
}

// incarnation is the launcher's name for this start of the job, or "": its
// start variables' values joined by dots after the launcher's name, kept to
// what a checkpoint's incarnation may hold (printable ASCII, no spaces).
func (c convention) incarnation(get func(string) (string, bool)) string {
	if len(c.start) == 0 {
		return ""
	}
	parts := []string{c.name}
	for i, n := range c.start {
		v, ok := get(n)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			if i == 0 {
				return ""
			}
			v = "0"
		}
		parts = append(parts, v)
	}
	inc := strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return '_'
		}
		return r
	}, strings.Join(parts, "."))
	if len(inc) > checkpoint.MaxIncarnation {
		// Too long to keep whole: a digest of it names the start as well.
		sum := sha256.Sum256([]byte(inc))
		inc = c.name + "." + hex.EncodeToString(sum[:12])
	}
	return inc
}

// missing lists the required variables of c that are not set.
func missing(c convention, get func(string) (string, bool)) []string {
	var out []string
	for _, n := range []string{c.rank, c.world} {
		if n == "" {
			continue
		}
		if _, ok := get(n); !ok {
			out = append(out, n)
		}
	}
	return out
}
