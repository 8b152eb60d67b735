package main

import (
	"os"
	"strings"
	"testing"
)

// launcherVars are every variable RankFromEnv reads, emptied out of the
// test's own environment by envWith so that the host's launcher (a test run
// under Slurm) does not leak in.
var launcherVars = []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "JOB_COMPLETION_INDEX"}

// runLaunched runs sluice with only the given launcher variables set.
func runLaunched(t *testing.T, vars []string, args ...string) result {
	t.Helper()
	for _, v := range launcherVars {
		unsetenv(t, v)
	}
	return runEnv(t, vars, args...)
}

func unsetenv(t *testing.T, name string) {
	t.Setenv(name, "") // restored at cleanup; unset meanwhile
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

func TestCatRankFromEnv(t *testing.T) {
	want := ok(t, "cat", dataDir, "--no-progress", "--rank", "1", "--world-size", "3", "--num-splits", "6", "--limit", "40")
	for _, tc := range []struct {
		name string
		vars []string
		args []string
	}{
		{"torchrun", []string{"RANK=1", "WORLD_SIZE=3", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=3"}, nil},
		{"slurm", []string{"SLURM_PROCID=1", "SLURM_NTASKS=3"}, nil},
		{"openmpi", []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3"}, nil},
		{"kubernetes", []string{"JOB_COMPLETION_INDEX=1"}, []string{"--world-size", "3"}},
		{"torchrun picked inside slurm", []string{"RANK=1", "WORLD_SIZE=3", "SLURM_PROCID=0", "SLURM_NTASKS=1"}, []string{"--launcher", "torchrun"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"cat", dataDir, "--no-progress", "--rank-from-env", "--num-splits", "6", "--limit", "40"}, tc.args...)
			r := runLaunched(t, tc.vars, args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if r.stdout != want {
				t.Fatalf("rows differ from --rank 1 --world-size 3:\n%s\nwant:\n%s", head(r.stdout), head(want))
			}
		})
	}
}

func TestCatRankFromEnvErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars []string
		args []string
		code int
		want []string
	}{
		{"none", nil, nil, exitUsage, []string{"--rank-from-env", "no launcher"}},
		{"partial", []string{"RANK=1"}, nil, exitFailure, []string{"torchrun", "partial", "WORLD_SIZE"}},
		{"conflict", []string{"RANK=1", "WORLD_SIZE=3", "SLURM_PROCID=0", "SLURM_NTASKS=1"}, nil, exitFailure, []string{"disagree", "RANK/WORLD_SIZE", "SLURM_PROCID/SLURM_NTASKS"}},
		{"kubernetes without world size", []string{"JOB_COMPLETION_INDEX=1"}, nil, exitFailure, []string{"JOB_COMPLETION_INDEX", "world size"}},
		{"world size disagrees", []string{"RANK=1", "WORLD_SIZE=3"}, []string{"--world-size", "2"}, exitFailure, []string{"world size 3", "WorldSize is 2"}},
		{"rank and rank-from-env", []string{"RANK=1", "WORLD_SIZE=3"}, []string{"--rank", "1"}, exitUsage, []string{"--rank and --rank-from-env"}},
		{"launcher alone", nil, []string{"--launcher", "slurm"}, exitUsage, []string{"--launcher needs --rank-from-env"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"cat", dataDir, "--no-progress", "--num-splits", "6", "--limit", "4"}
			if tc.name != "launcher alone" {
				args = append(args, "--rank-from-env")
			}
			r := runLaunched(t, tc.vars, append(args, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", r.code, tc.code, r.stderr)
			}
			checkOneLine(t, r.stderr, tc.want...)
		})
	}
}

func head(s string) string {
	lines := strings.SplitN(s, "\n", 4)
	return strings.Join(lines[:min(3, len(lines))], "\n")
}
