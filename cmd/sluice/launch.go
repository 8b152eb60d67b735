package main

import (
	"errors"
	"flag"
	"strconv"

	"github.com/sluicedata/sluice/stream"
)

// launchFlags take a command's rank and world size from the environment a
// launcher (torchrun, Slurm, Open MPI, a Kubernetes indexed Job) set, as a
// training process of the job would with stream.RankFromEnv: "what does
// rank 3 of this job receive" is then asked by running sluice in its place.
type launchFlags struct {
	fromEnv  bool
	launcher string
}

func (l *launchFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&l.fromEnv, "rank-from-env", false, "take --rank and --world-size from the launcher's environment (torchrun RANK/WORLD_SIZE, Slurm SLURM_PROCID/SLURM_NTASKS, Open MPI OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, Kubernetes JOB_COMPLETION_INDEX with --world-size)")
	fs.StringVar(&l.launcher, "launcher", "", "with --rank-from-env, read only this `launcher`'s variables: torchrun, slurm, openmpi or kubernetes (default: all, which must agree)")
}

// apply sets the flags --rank and --world-size from the environment when
// --rank-from-env is given, as if typed: what follows treats them as given
// (a checkpoint's world size does not override them). A --world-size on the
// command line is the world size of a Kubernetes indexed Job, and must agree
// with any other launcher's.
func (l *launchFlags) apply(fs *flag.FlagSet) error {
	switch {
	case !l.fromEnv && l.launcher != "":
		return usageErrorf("--launcher needs --rank-from-env")
	case !l.fromEnv:
		return nil
	case isSet(fs, "rank"):
		return usageErrorf("--rank and --rank-from-env exclude each other")
	}
	o := stream.LaunchOptions{Launcher: l.launcher}
	if isSet(fs, "world-size") {
		o.WorldSize, _ = strconv.Atoi(fs.Lookup("world-size").Value.String())
	}
	p, err := stream.RankFromEnv(o)
	if errors.Is(err, stream.ErrNoLauncher) {
		return usageErrorf("--rank-from-env: %v", err)
	}
	if err != nil {
		return err
	}
	return errors.Join(fs.Set("rank", strconv.Itoa(p.Rank)), fs.Set("world-size", strconv.Itoa(p.WorldSize)))
}
