package main

import (
	"io"
	"strings"
	"unicode/utf8"
)

// table lays out rows in columns two spaces apart, numbers right-aligned
// (a column whose header starts with '>' is right-aligned; the '>' is not
// printed).
type table struct {
	head  []string
	right []bool
	rows  [][]string
}

func newTable(head ...string) *table {
	t := &table{head: make([]string, len(head)), right: make([]bool, len(head))}
	for i, h := range head {
		t.head[i], t.right[i] = strings.CutPrefix(h, ">")
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	widths := make([]int, len(t.head))
	all := append([][]string{t.head}, t.rows...)
	for _, r := range all {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range all {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if t.right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
			if i < len(r)-1 {
				line.WriteString("  ")
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
