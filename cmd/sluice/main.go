// Command sluice inspects datasets the way sluice streams them, prints their
// rows in a rank's order, runs the benchmark harness and manages checkpoint
// stores:
//
//	sluice inspect URL...            files, row groups, chunks, splits, fingerprints
//	sluice cat URL...                rows as JSON lines
//	sluice locate URL...             where positions of an epoch's order come from
//	sluice checkpoint ls|show|rm DIR steps, ranks and cursors of a store
//	sluice bench [ARGS]              the benchmark harness
//
// Run "sluice help" for the exit codes and "sluice help COMMAND" for the
// flags of each command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/iceberg/catalogs"
	"github.com/sluicedata/sluice/storage"

	// The command reads whatever URL it is given, so it links every cloud
	// backend a library user chooses among.
	_ "github.com/sluicedata/sluice/storage/azure"
	_ "github.com/sluicedata/sluice/storage/gcs"
	_ "github.com/sluicedata/sluice/storage/s3"
)

// Exit codes. They are part of the interface: scripts test them.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitInterrupted = 130
)

const mainUsage = `sluice looks at training data the way the sluice library streams it.

Usage:
  sluice <command> [flags] [arguments]

Commands:
  inspect     files, row groups, chunks, the splits of an epoch and the fingerprints
  cat         rows as JSON lines, in the order one rank of a job receives them
  locate      the file, row group and row each position of an epoch's order comes from
  checkpoint  steps, ranks and cursors in a checkpoint store (ls, show, rm)
  bench       run the benchmark harness
  help        help on a command: sluice help <command>

Data URLs are Parquet and ORC files, CSV, TSV, JSON Lines and JSON files
(.csv, .tsv, .jsonl, .ndjson, .json, each also .gz or .zst), directories
(every such file below them, skipping names that start with '.' or '_'), globs such as
'data/*.parquet' (quoted, so that sluice expands them, not the shell),
plain paths, or URLs in any scheme sluice has a driver for (file://, and
s3://, gs://, azblob:// where the build links them; their credentials come
from the usual environment of each cloud's SDK).

Flags may come before or after arguments; '--' ends the flags. Every flag
has a one-dash form too (-limit 5 is --limit 5).

Exit status:
  0    success
  1    the command failed: a corrupt or unreadable file, files whose schemas
       disagree, a state that does not match the dataset, a store held by a
       running job, an I/O error
  2    usage error: unknown command or flag, a missing or malformed argument
  3    not found: a path or URL that names no data file; a checkpoint store,
       run or step with nothing stored
  130  interrupted by SIGINT or SIGTERM

Errors go to stderr on one line: "sluice: <command>: <error>". Progress is
drawn on stderr only when stderr is a terminal (and for cat, only when stdout
is not); --no-progress turns it off.
`

// command is one subcommand. run gets the arguments after the command's
// name and returns an error; main turns it into one line and an exit code.
type command struct {
	name  string
	usage func() string
	run   func(ctx context.Context, env *env, args []string) error
}

// env is what a command may touch of the process, so that tests of the
// parsing code need not spawn a process.
type env struct {
	stdout, stderr io.Writer
	// progress reports whether progress may be drawn on stderr, given
	// whether the command's own output goes to stdout while it runs.
	progress func(streamsStdout bool) bool
}

func commands() []command {
	return []command{
		{"inspect", inspectUsage, runInspect},
		{"cat", catUsage, runCat},
		{"locate", locateUsage, runLocate},
		{"checkpoint", checkpointUsage, runCheckpoint},
		{"bench", benchUsage, runBench},
	}
}

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(args []string) int {
	e := &env{stdout: os.Stdout, stderr: os.Stderr, progress: terminalProgress}
	// Library debug logs are noise here; warnings still reach the user.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

	if len(args) == 0 {
		fmt.Fprint(e.stderr, mainUsage)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		fmt.Fprint(e.stdout, mainUsage)
		return exitOK
	case "help":
		if len(args) == 1 {
			fmt.Fprint(e.stdout, mainUsage)
			return exitOK
		}
		for _, c := range commands() {
			if c.name == args[1] {
				fmt.Fprint(e.stdout, c.usage())
				return exitOK
			}
		}
		return report(e, "help", usageErrorf("unknown command %q", args[1]))
	}
	var cmd *command
	for _, c := range commands() {
		if c.name == name {
			cmd = &c
			break
		}
	}
	if cmd == nil {
		if strings.HasPrefix(name, "-") {
			return report(e, "", usageErrorf("flag %s before the command; flags follow it: sluice <command> [flags]", name))
		}
		return report(e, "", usageErrorf("unknown command %q", name))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.run(ctx, e, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(e.stdout, cmd.usage())
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code // the harness has already said why
	}
	if err != nil && ctx.Err() != nil {
		// Whatever the command was doing when the signal came, the reason it
		// stopped is the signal.
		return report(e, cmd.name, errInterrupted)
	}
	return report(e, cmd.name, err)
}

var errInterrupted = errors.New("interrupted")

// exitError carries a child's exit status through report unchanged.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError marks errors in what the user typed, as opposed to what the
// data or the store did.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// notFoundError marks a lookup that found nothing, where the library has no
// sentinel of its own to wrap (a step missing from a listing).
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func notFoundf(format string, args ...any) error {
	return &notFoundError{fmt.Sprintf(format, args...)}
}

// report prints err on one line and returns the exit code it stands for.
func report(e *env, cmd string, err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code // the harness has already said why
	}
	code := exitCode(err)
	prefix := "sluice: "
	if cmd != "" {
		prefix += cmd + ": "
	}
	msg := oneLine(err.Error())
	if cmd != "" {
		// The checkpoint package's errors begin with its name, which is
		// also the command's: say it once.
		msg = strings.TrimPrefix(msg, cmd+": ")
	}
	if code == exitUsage {
		help := "sluice --help"
		if cmd != "" && cmd != "help" {
			help = "sluice " + cmd + " --help"
		}
		msg += " (see '" + help + "')"
	}
	fmt.Fprintln(e.stderr, prefix+msg)
	return code
}

func exitCode(err error) int {
	var ue *usageError
	var nf *notFoundError
	switch {
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.As(err, &ue), errors.Is(err, catalogs.ErrSpec):
		return exitUsage
	case errors.As(err, &nf),
		errors.Is(err, storage.ErrNotFound),
		errors.Is(err, formats.ErrEmpty),
		errors.Is(err, checkpoint.ErrNotFound):
		return exitNotFound
	}
	return exitFailure
}

// oneLine joins the lines of a message (a decoder's panic comes with a
// stack) so that every error is one line of stderr, which log collectors
// and grep keep whole.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var parts []string
	for line := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, " | ")
}
