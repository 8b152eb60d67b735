package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// newFlagSet returns a flag set that neither prints nor exits: parse turns
// its errors into usage errors, reported on one line like every other error.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses flags wherever they are among the arguments, since users type
// "sluice cat data/ --limit 5" as often as "sluice cat --limit 5 data/", and
// returns the arguments that are not flags, in order. "--" ends the flags.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			msg := err.Error()
			if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
				msg = "unknown flag --" + strings.TrimPrefix(name, "-")
			}
			return nil, &usageError{msg}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// isSet reports whether the flag was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// flagDefaults lists the flags of fs the way GNU tools do (--name), which is
// how the usage texts and the docs spell them, wrapped to 80 columns.
func flagDefaults(fs *flag.FlagSet) string {
	const indent = 26
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		name := "  --" + f.Name
		if typ != "" {
			name += " " + typ
		}
		if !isZeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		b.WriteString(name)
		if len(name) <= indent-2 {
			b.WriteString(strings.Repeat(" ", indent-len(name)))
		} else {
			b.WriteString("\n" + strings.Repeat(" ", indent))
		}
		b.WriteString(wrap(usage, 80-indent, strings.Repeat(" ", indent)))
		b.WriteString("\n")
	})
	return b.String()
}

// wrap breaks text into lines of at most width columns, the lines after the
// first starting with prefix.
func wrap(text string, width int, prefix string) string {
	var b strings.Builder
	col := 0
	for i, word := range strings.Fields(text) {
		switch {
		case i == 0:
		case col+1+len(word) > width:
			b.WriteString("\n" + prefix)
			col = 0
		default:
			b.WriteString(" ")
			col++
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}

func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "[]":
		return true
	}
	return false
}

// listFlag is a comma-separated list that may also be given several times:
// --columns a,b --columns c is a, b, c.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return fmt.Errorf("empty name in %q", s)
		}
		*l = append(*l, part)
	}
	return nil
}

// sizeFlag is a byte count written as a number with an optional binary unit
// (K, KiB, M, MiB, G, GiB; K and KiB both mean 1024).
type sizeFlag int64

func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }

func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}

func parseSize(v string) (int64, error) {
	t := strings.TrimSpace(v)
	mult := int64(1)
	upper := strings.ToUpper(t)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(upper, u.suffix) {
			t = strings.TrimSpace(t[:len(t)-len(u.suffix)])
			mult = u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (a number of bytes, optionally with K, M or G)", v)
	}
	return n * mult, nil
}
