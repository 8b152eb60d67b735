package stream

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The README documents this package's API and links the rest of the
// documentation (docs/*.md), so the checks that keep them true live here:
// every Options field has a row in the README's options table, and every
// relative link and anchor in the repository's Markdown resolves.

// TestREADMEListsEveryOption fails when an Options field has no row in the
// README's options table, or a row names a field Options does not have.
func TestREADMEListsEveryOption(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "## Options and their defaults\n")
	if !ok {
		t.Fatal(`README has no "## Options and their defaults" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	listed := map[string]bool{}
	name := regexp.MustCompile("`([A-Za-z.]+)`")
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			listed[m[1]] = true
		}
	}
	opts := reflect.TypeFor[Options]()
	for f := range opts.Fields() {
		if !listed[f.Name] {
			t.Errorf("README's options table has no row for Options.%s", f.Name)
		}
	}
	// The bounds are grouped, and every one has its row all the same.
	limits := reflect.TypeFor[Limits]()
	for f := range limits.Fields() {
		if !listed["Limits."+f.Name] {
			t.Errorf("README's options table has no row for Options.Limits.%s", f.Name)
		}
	}
	for n := range listed {
		top, sub, _ := strings.Cut(n, ".")
		f, ok := opts.FieldByName(top)
		if !ok {
			t.Errorf("README's options table lists %s, which Options does not have", n)
			continue
		}
		if f.Type != limits || sub == "" {
			continue
		}
		if _, ok := limits.FieldByName(sub); !ok {
			t.Errorf("README's options table lists %s, which Limits does not have", n)
		}
	}
}

// TestDocLinksResolve checks every relative link of every Markdown file in
// the repository: the file or folder it names exists, and an anchor names a
// heading of the file it points into (by GitHub's rules for heading ids).
func TestDocLinksResolve(t *testing.T) {
	root := ".."
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 2 {
		t.Fatalf("found %d Markdown files under %s", len(docs), root)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingIDs(string(raw))
		anchors[path] = a
		return a
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), filepath.FromSlash(file))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %v", doc, target, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", doc, target)
				continue
			}
			if !anchorsOf(path)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with id %q", doc, target, path, anchor)
			}
		}
	}
	t.Logf("%d Markdown files, %d relative links", len(docs), checked)
}

// withoutCode blanks fenced code blocks and code spans, whose brackets are
// Go or shell, not links.
func withoutCode(doc string) string {
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(withoutFences(doc), "``")
}

// headingIDs are the ids GitHub gives a document's headings: the text in
// lower case, without punctuation, spaces as hyphens, a repeated id
// numbered -1, -2 and on.
func headingIDs(doc string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	linkText := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	for line := range strings.SplitSeq(withoutFences(doc), "\n") {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimLeft(text, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		text = linkText.ReplaceAllString(strings.TrimSpace(text), "$1")
		var id strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				id.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				id.WriteRune(r)
			}
		}
		s := id.String()
		if n := seen[s]; n > 0 {
			ids[s+"-"+strconv.Itoa(n)] = true
		} else {
			ids[s] = true
		}
		seen[s]++
	}
	return ids
}

// withoutFences blanks fenced code blocks, whose # lines are comments.
func withoutFences(doc string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.SplitSeq(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		} else if !fenced {
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}
