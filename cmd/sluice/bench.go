package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

const (
	modulePath = "github.com/sluicedata/sluice"
	benchPkg   = modulePath + "/bench"
)

func benchUsage() string {
	return `Usage: sluice bench [ARGS...]

Runs sluice's benchmark harness (` + benchPkg + `) with ARGS
unchanged, its stdin, stdout and stderr being sluice's, and exits with its
exit status (128+N if a signal N ended it). A SIGTERM sent to sluice is
passed on to it. "sluice bench -- -help" prints the harness's own flags; a
leading "--" is dropped.

The harness is looked for, in this order:
  1. $SLUICE_BENCH: the path of a harness binary, used as it is;
  2. sluice-bench, then bench, in the directory of the sluice executable,
     if its build information says it is the harness.
       go install ` + modulePath + `/...@latest
     installs both side by side; in a checkout,
       go build -o "$(dirname "$(command -v sluice)")/sluice-bench" ./bench
  3. built by the go command into a temporary directory and removed
     afterwards: from the source of the module in the current directory if
     it is ` + modulePath + `, else at the module version this
     sluice was built from. The go build cache makes later builds quick.

Examples:
  sluice bench -quick -out results/
  sluice bench -tiny
`
}

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			return flag.ErrHelp
		case "--":
			args = args[1:]
		}
	}
	path, cleanup, err := findBench(ctx, e)
	if err != nil {
		return err
	}
	defer cleanup()
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	// SIGINT from a terminal reaches the harness by itself (same process
	// group); a SIGTERM aimed at sluice alone, as a scheduler sends it,
	// would not. sluice itself outlives both so as to report the harness's
	// status.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the harness %s: %w", path, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(interface {
			Signaled() bool
			Signal() syscall.Signal
		}); ok && ws.Signaled() {
			return &exitError{128 + int(ws.Signal())}
		}
		return &exitError{ee.ExitCode()}
	}
	if err != nil {
		return fmt.Errorf("run the harness %s: %w", path, err)
	}
	return nil
}

// findBench returns the path of a harness binary and a function that
// removes it if it was built here.
func findBench(ctx context.Context, e *env) (string, func(), error) {
	noop := func() {}
	if p := os.Getenv("SLUICE_BENCH"); p != "" {
		return p, noop, nil
	}
	if self, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(self); err == nil {
			self = real
		}
		for _, name := range []string{"sluice-bench", "bench"} {
			p := filepath.Join(filepath.Dir(self), name+exeSuffix())
			if bi, err := buildinfo.ReadFile(p); err == nil && bi.Path == benchPkg {
				return p, noop, nil
			}
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", noop, fmt.Errorf("no benchmark harness: SLUICE_BENCH is not set, no sluice-bench beside sluice, and no go command to build one (see 'sluice bench --help')")
	}
	tmp, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return "", noop, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	var build *exec.Cmd
	if inSluiceModule() {
		out := filepath.Join(tmp, "sluice-bench"+exeSuffix())
		build = exec.CommandContext(ctx, goTool, "build", "-o", out, benchPkg)
	} else if v := ownVersion(); v != "" {
		// go build takes no @version; go install does, into GOBIN.
		build = exec.CommandContext(ctx, goTool, "install", benchPkg+"@"+v)
		build.Env = append(os.Environ(), "GOBIN="+tmp)
	} else {
		cleanup()
		return "", noop, fmt.Errorf("no benchmark harness: SLUICE_BENCH is not set, no sluice-bench beside sluice, the current directory is not in a checkout of %s and this sluice was built without a module version to fetch it at (see 'sluice bench --help')", modulePath)
	}
	fmt.Fprintf(e.stderr, "sluice: bench: building the harness: %s\n", strings.Join(build.Args, " "))
	build.Stdout, build.Stderr = e.stderr, e.stderr
	if err := build.Run(); err != nil {
		cleanup()
		return "", noop, fmt.Errorf("build the harness (%s): %w", strings.Join(build.Args, " "), err)
	}
	for _, name := range []string{"sluice-bench", "bench"} {
		p := filepath.Join(tmp, name+exeSuffix())
		if _, err := os.Stat(p); err == nil {
			return p, cleanup, nil
		}
	}
	cleanup()
	return "", noop, fmt.Errorf("build the harness: no binary in %s after %s", tmp, strings.Join(build.Args, " "))
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

// inSluiceModule reports whether the go command, run here, would resolve
// the harness package from a checkout of sluice: the nearest go.mod above
// the working directory declares sluice's module path.
func inSluiceModule() bool {
	dir, err := os.Getwd()
	if err != nil {
		return false
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module"); ok {
					return strings.Trim(strings.TrimSpace(rest), `"`) == modulePath
				}
			}
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// ownVersion is the module version this binary was built at, if it is one
// the go command can fetch (not a development build or a modified tree).
func ownVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path != modulePath {
		return ""
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" || strings.Contains(v, "+") {
		return ""
	}
	return v
}
