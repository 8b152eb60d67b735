package stream

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
)

func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestRankFromEnvConventions(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		opts LaunchOptions
		want Placement
	}{
		{"torchrun", []string{"RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4"}, LaunchOptions{},
			Placement{Launcher: "torchrun", Rank: 5, WorldSize: 8, LocalRank: 1, LocalWorldSize: 4}},
		{"torchrun without local", []string{"RANK", "0", "WORLD_SIZE", "1"}, LaunchOptions{},
			Placement{Launcher: "torchrun", Rank: 0, WorldSize: 1, LocalRank: -1, LocalWorldSize: -1}},
		{"slurm", []string{"SLURM_PROCID", "3", "SLURM_NTASKS", "6", "SLURM_LOCALID", "1"}, LaunchOptions{},
			Placement{Launcher: "slurm", Rank: 3, WorldSize: 6, LocalRank: 1, LocalWorldSize: -1}},
		{"openmpi", []string{"OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_LOCAL_RANK", "0", "OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, LaunchOptions{},
			Placement{Launcher: "openmpi", Rank: 2, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2}},
		{"kubernetes", []string{"JOB_COMPLETION_INDEX", "7"}, LaunchOptions{WorldSize: 8},
			Placement{Launcher: "kubernetes", Rank: 7, WorldSize: 8, LocalRank: 0, LocalWorldSize: 1}},
		{"srun with open mpi agreeing", []string{"SLURM_PROCID", "1", "SLURM_NTASKS", "2", "OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, LaunchOptions{},
			Placement{Launcher: "slurm", Rank: 1, WorldSize: 2, LocalRank: -1, LocalWorldSize: 2}},
		{"torchrun inside slurm, picked", []string{"SLURM_PROCID", "1", "SLURM_NTASKS", "2", "RANK", "5", "WORLD_SIZE", "8"}, LaunchOptions{Launcher: "torchrun"},
			Placement{Launcher: "torchrun", Rank: 5, WorldSize: 8, LocalRank: -1, LocalWorldSize: -1}},
		{"world size given and agreeing", []string{"RANK", "1", "WORLD_SIZE", "2"}, LaunchOptions{WorldSize: 2},
			Placement{Launcher: "torchrun", Rank: 1, WorldSize: 2, LocalRank: -1, LocalWorldSize: -1}},
		{"spaces around numbers", []string{"RANK", " 1 ", "WORLD_SIZE", "2\n"}, LaunchOptions{},
			Placement{Launcher: "torchrun", Rank: 1, WorldSize: 2, LocalRank: -1, LocalWorldSize: -1}},
		// The launcher's name for this start of the job.
		{"torchrun restarted", []string{"RANK", "1", "WORLD_SIZE", "2", "TORCHELASTIC_RUN_ID", "job 7", "TORCHELASTIC_RESTART_COUNT", "3"}, LaunchOptions{},
			Placement{Launcher: "torchrun", Rank: 1, WorldSize: 2, LocalRank: -1, LocalWorldSize: -1, Incarnation: "torchrun.job_7.3"}},
		{"slurm requeued", []string{"SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_JOB_ID", "4412", "SLURM_STEP_ID", "0", "SLURM_RESTART_COUNT", "2"}, LaunchOptions{},
			Placement{Launcher: "slurm", Rank: 0, WorldSize: 2, LocalRank: -1, LocalWorldSize: -1, Incarnation: "slurm.4412.0.2"}},
		{"slurm first start", []string{"SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_JOB_ID", "4412"}, LaunchOptions{},
			Placement{Launcher: "slurm", Rank: 0, WorldSize: 2, LocalRank: -1, LocalWorldSize: -1, Incarnation: "slurm.4412.0.0"}},
		{"open mpi job", []string{"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_MCA_ess_base_jobid", "1234567"}, LaunchOptions{},
			Placement{Launcher: "openmpi", Rank: 0, WorldSize: 2, LocalRank: -1, LocalWorldSize: -1, Incarnation: "openmpi.1234567"}},
		{"restart count without a run id", []string{"RANK", "0", "WORLD_SIZE", "2", "TORCHELASTIC_RESTART_COUNT", "1"}, LaunchOptions{},
			Placement{Launcher: "torchrun", Rank: 0, WorldSize: 2, LocalRank: -1, LocalWorldSize: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Getenv = envOf(tc.env...)
			got, err := RankFromEnv(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// An incarnation too long for a checkpoint is kept as a digest, which
// every rank computes alike and a checkpoint accepts.
func TestRankFromEnvLongIncarnation(t *testing.T) {
	long := strings.Repeat("r", 300)
	get := envOf("RANK", "0", "WORLD_SIZE", "2", "TORCHELASTIC_RUN_ID", long, "TORCHELASTIC_RESTART_COUNT", "1")
	p, err := RankFromEnv(LaunchOptions{Getenv: get})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := RankFromEnv(LaunchOptions{Getenv: envOf("RANK", "1", "WORLD_SIZE", "2", "TORCHELASTIC_RUN_ID", long, "TORCHELASTIC_RESTART_COUNT", "1")})
	r, _ := RankFromEnv(LaunchOptions{Getenv: envOf("RANK", "0", "WORLD_SIZE", "2", "TORCHELASTIC_RUN_ID", long, "TORCHELASTIC_RESTART_COUNT", "2")})
	if len(p.Incarnation) > checkpoint.MaxIncarnation || p.Incarnation != q.Incarnation || p.Incarnation == r.Incarnation {
		t.Fatalf("incarnations %q, %q (same start), %q (a restart)", p.Incarnation, q.Incarnation, r.Incarnation)
	}
	st := checkpoint.State{Incarnation: p.Incarnation}
	if err := st.Validate(); err != nil && strings.Contains(err.Error(), "incarnation") {
		t.Fatal(err)
	}
}

func TestRankFromEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		opts LaunchOptions
		says []string // the error names these
	}{
		{"torchrun rank only", []string{"RANK", "1"}, LaunchOptions{}, []string{"torchrun", "partial", "RANK", "WORLD_SIZE"}},
		{"torchrun world only", []string{"WORLD_SIZE", "4"}, LaunchOptions{}, []string{"torchrun", "partial", "RANK"}},
		{"torchrun local only", []string{"LOCAL_RANK", "0"}, LaunchOptions{}, []string{"torchrun", "LOCAL_RANK", "RANK, WORLD_SIZE"}},
		{"slurm partial", []string{"SLURM_NTASKS", "4"}, LaunchOptions{}, []string{"slurm", "SLURM_NTASKS", "SLURM_PROCID"}},
		{"openmpi partial", []string{"OMPI_COMM_WORLD_RANK", "0"}, LaunchOptions{}, []string{"openmpi", "OMPI_COMM_WORLD_SIZE"}},
		{"kubernetes without world size", []string{"JOB_COMPLETION_INDEX", "0"}, LaunchOptions{}, []string{"JOB_COMPLETION_INDEX", "WorldSize"}},
		{"not a number", []string{"RANK", "one", "WORLD_SIZE", "2"}, LaunchOptions{}, []string{"RANK", `"one"`}},
		{"negative", []string{"SLURM_PROCID", "-1", "SLURM_NTASKS", "2"}, LaunchOptions{}, []string{"SLURM_PROCID", `"-1"`}},
		{"zero world", []string{"RANK", "0", "WORLD_SIZE", "0"}, LaunchOptions{}, []string{"WORLD_SIZE", `"0"`}},
		{"rank outside world", []string{"RANK", "4", "WORLD_SIZE", "4"}, LaunchOptions{}, []string{"rank 4", "RANK", "world size 4"}},
		{"kubernetes index outside", []string{"JOB_COMPLETION_INDEX", "8"}, LaunchOptions{WorldSize: 8}, []string{"JOB_COMPLETION_INDEX", "rank 8"}},
		{"local rank outside", []string{"RANK", "1", "WORLD_SIZE", "4", "LOCAL_RANK", "2", "LOCAL_WORLD_SIZE", "2"}, LaunchOptions{}, []string{"LOCAL_RANK", "LOCAL_WORLD_SIZE"}},
		{"local world larger", []string{"RANK", "1", "WORLD_SIZE", "2", "LOCAL_WORLD_SIZE", "4"}, LaunchOptions{}, []string{"LOCAL_WORLD_SIZE", "world size 2"}},
		{"conflict", []string{"RANK", "5", "WORLD_SIZE", "8", "SLURM_PROCID", "1", "SLURM_NTASKS", "2"}, LaunchOptions{},
			[]string{"disagree", "RANK/WORLD_SIZE", "SLURM_PROCID/SLURM_NTASKS", "rank 5 of 8", "rank 1 of 2", "Launcher"}},
		{"conflict with kubernetes", []string{"RANK", "1", "WORLD_SIZE", "4", "JOB_COMPLETION_INDEX", "2"}, LaunchOptions{WorldSize: 4},
			[]string{"disagree", "JOB_COMPLETION_INDEX", "RANK/WORLD_SIZE"}},
		{"given world size disagrees", []string{"RANK", "1", "WORLD_SIZE", "2"}, LaunchOptions{WorldSize: 4}, []string{"RANK/WORLD_SIZE", "world size 2", "WorldSize is 4"}},
		{"unknown launcher", nil, LaunchOptions{Launcher: "pbs"}, []string{`"pbs"`}},
		{"negative given world size", nil, LaunchOptions{WorldSize: -1}, []string{"WorldSize -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Getenv = envOf(tc.env...)
			got, err := RankFromEnv(tc.opts)
			if err == nil {
				t.Fatalf("no error; got %+v", got)
			}
			if errors.Is(err, ErrNoLauncher) {
				t.Fatalf("error %v is ErrNoLauncher, which says nothing was set", err)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestRankFromEnvNoLauncher(t *testing.T) {
	_, err := RankFromEnv(LaunchOptions{Getenv: envOf("HOME", "/root", "SLURM_JOB_ID", "12")})
	if !errors.Is(err, ErrNoLauncher) {
		t.Fatalf("got %v, want ErrNoLauncher", err)
	}
	// A picked launcher that is absent names its variable.
	_, err = RankFromEnv(LaunchOptions{Launcher: "openmpi", Getenv: envOf("RANK", "0", "WORLD_SIZE", "1")})
	if !errors.Is(err, ErrNoLauncher) || !strings.Contains(err.Error(), "OMPI_COMM_WORLD_RANK") {
		t.Fatalf("got %v, want ErrNoLauncher naming OMPI_COMM_WORLD_RANK", err)
	}
}

func TestRankFromEnvProcess(t *testing.T) {
	// The default lookup is the process's own environment.
	for _, c := range conventions {
		for _, n := range []string{c.rank, c.world, c.localRank, c.localW} {
			if n != "" {
				t.Setenv(n, "")
			}
		}
	}
	t.Setenv("OMPI_COMM_WORLD_RANK", "3")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
	clear := func(names ...string) {
		// t.Setenv restores at cleanup; unsetting inside it needs os.
		for _, n := range names {
			unsetenv(t, n)
		}
	}
	var all []string
	for _, c := range conventions {
		if c.name == "openmpi" {
			continue
		}
		for _, n := range []string{c.rank, c.world, c.localRank, c.localW} {
			if n != "" {
				all = append(all, n)
			}
		}
	}
	clear(append(all, "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")...)
	got, err := RankFromEnv(LaunchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Launcher != "openmpi" || got.Rank != 3 || got.WorldSize != 4 {
		t.Fatalf("got %+v", got)
	}
}

// unsetenv removes a variable for the rest of the test, restored after it.
func unsetenv(t *testing.T, name string) {
	t.Setenv(name, "") // registers the restore
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}
