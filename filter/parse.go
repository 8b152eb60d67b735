// Package filter holds sluice's row filters: SQL-like boolean expressions
// over a dataset's columns, such as
//
//	label = 3 AND x > 0.5
//	name IN ('a', 'b') OR NOT (y IS NULL)
//	ts >= '2024-01-01' AND "weird col" BETWEEN 1 AND 9
//
// Parse reads the text; a Filter is then checked against a schema (unknown
// columns and literals that cannot be compared with their column are
// errors), evaluated over record batches with arrow-go's compute kernels,
// and asked by format drivers whether a unit whose statistics they know
// can hold a row that passes (see Stats). Nulls behave as in SQL: a
// comparison with a null is unknown, and a row whose predicate is unknown
// is not kept.
package filter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrSyntax is wrapped by every parse error; the error is a *SyntaxError.
var ErrSyntax = errors.New("filter syntax error")

// SyntaxError is where and why a filter's text does not parse.
type SyntaxError struct {
	// Pos is the byte offset in the text (from 0) of the offending token.
	Pos int
	// Found is the token found there ("end of input" at the end).
	Found string
	// Expected says what would have been accepted.
	Expected string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("filter: at offset %d: expected %s, found %s", e.Pos, e.Expected, e.Found)
}

// Unwrap makes errors.Is(err, ErrSyntax) hold.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// maxDepth bounds nesting, so that hostile text cannot exhaust the stack.
const maxDepth = 200

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tQuotedIdent
	tNumber
	tString
	tOp     // = <> != < <= > >=
	tLParen // (
	tRParen // )
	tComma
)

type token struct {
	kind tokKind
	text string // identifier, string contents, number text, operator
	pos  int
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return "string " + quoteString(t.text)
	case tQuotedIdent:
		return "column " + quoteIdent(t.text)
	}
	return strconv.Quote(t.text)
}

// keyword reports whether t is the keyword kw (case-insensitive); quoted
// identifiers are never keywords.
func (t token) keyword(kw string) bool {
	return t.kind == tIdent && strings.EqualFold(t.text, kw)
}

var keywords = map[string]bool{"AND": true, "OR": true, "NOT": true, "IN": true, "IS": true, "NULL": true, "BETWEEN": true, "TRUE": true, "FALSE": true, "DATE": true, "TIMESTAMP": true}

func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')' || c == ',':
			k := map[byte]tokKind{'(': tLParen, ')': tRParen, ',': tComma}[c]
			toks = append(toks, token{k, string(c), i})
			i++
		case c == '=':
			toks = append(toks, token{tOp, "=", i})
			i++
		case c == '<' || c == '>' || c == '!':
			op := string(c)
			if i+1 < len(src) && (src[i+1] == '=' || c == '<' && src[i+1] == '>') {
				op += string(src[i+1])
			}
			if op == "!" {
				return nil, &SyntaxError{Pos: i, Found: `"!"`, Expected: `"!=" (use NOT for negation)`}
			}
			toks = append(toks, token{tOp, op, i})
			i += len(op)
		case c == '\'' || c == '"':
			s, n, ok := scanQuoted(src[i:], c)
			if !ok {
				what := "string"
				if c == '"' {
					what = "quoted column name"
				}
				return nil, &SyntaxError{Pos: i, Found: "end of input", Expected: fmt.Sprintf("the closing %c of the %s", c, what)}
			}
			if !utf8.ValidString(s) {
				return nil, &SyntaxError{Pos: i, Found: "invalid UTF-8", Expected: "UTF-8 text"}
			}
			k := tString
			if c == '"' {
				k = tQuotedIdent
				if s == "" {
					return nil, &SyntaxError{Pos: i, Found: `""`, Expected: "a non-empty column name"}
				}
			}
			toks = append(toks, token{k, s, i})
			i += n
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			n := scanNumber(src[i:])
			toks = append(toks, token{tNumber, src[i : i+n], i})
			i += n
		case c == '-' || c == '+':
			// A sign belongs to the number after it: there is no arithmetic.
			n := 0
			if i+1 < len(src) {
				n = scanNumber(src[i+1:])
			}
			if n == 0 {
				return nil, &SyntaxError{Pos: i, Found: strconv.Quote(string(c)), Expected: "a number after the sign"}
			}
			toks = append(toks, token{tNumber, src[i : i+1+n], i})
			i += 1 + n
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(src) && (src[j] == '_' || src[j] == '.' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			toks = append(toks, token{tIdent, src[i:j], i})
			i = j
		default:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, &SyntaxError{Pos: i, Found: strconv.QuoteRune(r), Expected: "a column, a literal, an operator or a parenthesis"}
		}
	}
	return append(toks, token{kind: tEOF, pos: len(src)}), nil
}

// scanQuoted reads a quoted token at the start of s; a doubled quote
// stands for one. It returns the contents and the bytes consumed.
func scanQuoted(s string, q byte) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != q {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == q {
			b.WriteByte(q)
			i++
			continue
		}
		return b.String(), i + 1, true
	}
	return "", 0, false
}

// scanNumber is the length of the number at the start of s (0 if none):
// digits, an optional fraction, an optional exponent.
func scanNumber(s string) int {
	i := 0
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	n := digits()
	if i < len(s) && s[i] == '.' {
		i++
		n += digits()
	}
	if n == 0 {
		return 0
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			i = j // not an exponent: the identifier lexer will complain
		}
	}
	return i
}

// The syntax tree. Every node prints itself in canonical form: keywords in
// capitals, columns double-quoted, every binary operation parenthesized.
type node interface {
	String() string
}

type column struct {
	name string
	pos  int
}

type litKind int

const (
	litNumber litKind = iota
	litString
	litBool
	litNull
	litDate      // DATE '...'
	litTimestamp // TIMESTAMP '...'
)

type literal struct {
	kind litKind
	// For numbers: isInt with i (exact) or f; for strings, dates and
	// timestamps: s; for booleans: b.
	isInt bool
	i     int64
	f     float64
	s     string
	b     bool
	pos   int
}

type comparison struct {
	op   string // = <> < <= > >=
	l, r node
	pos  int
}

type inList struct {
	x    node
	list []*literal
	not  bool
	pos  int
}

type between struct {
	x, lo, hi node
	not       bool
	pos       int
}

type isNull struct {
	x   node
	not bool
	pos int
}

type logical struct {
	op   string // AND, OR
	l, r node
}

type negation struct {
	x   node
	pos int
}

func (c *column) String() string { return quoteIdent(c.name) }
func (c *comparison) String() string {
	return "(" + c.l.String() + " " + c.op + " " + c.r.String() + ")"
}
func (l *logical) String() string  { return "(" + l.l.String() + " " + l.op + " " + l.r.String() + ")" }
func (n *negation) String() string { return "(NOT " + n.x.String() + ")" }

func (in *inList) String() string {
	var b strings.Builder
	b.WriteString("(" + in.x.String())
	if in.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	for i, l := range in.list {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(l.String())
	}
	b.WriteString("))")
	return b.String()
}

func (bt *between) String() string {
	not := ""
	if bt.not {
		not = " NOT"
	}
	return "(" + bt.x.String() + not + " BETWEEN " + bt.lo.String() + " AND " + bt.hi.String() + ")"
}

func (n *isNull) String() string {
	if n.not {
		return "(" + n.x.String() + " IS NOT NULL)"
	}
	return "(" + n.x.String() + " IS NULL)"
}

func (l *literal) String() string {
	switch l.kind {
	case litNumber:
		if l.isInt {
			return strconv.FormatInt(l.i, 10)
		}
		s := strconv.FormatFloat(l.f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") && !strings.Contains(s, "Inf") && !strings.Contains(s, "NaN") {
			s += ".0" // stays a float when parsed again
		}
		return s
	case litString:
		return quoteString(l.s)
	case litBool:
		if l.b {
			return "TRUE"
		}
		return "FALSE"
	case litDate:
		return "DATE " + quoteString(l.s)
	case litTimestamp:
		return "TIMESTAMP " + quoteString(l.s)
	}
	return "NULL"
}

func quoteIdent(s string) string  { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
func quoteString(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

type parser struct {
	toks  []token
	at    int
	depth int
}

func (p *parser) peek() token { return p.toks[p.at] }
func (p *parser) next() token {
	t := p.toks[p.at]
	if t.kind != tEOF {
		p.at++
	}
	return t
}

func (p *parser) fail(expected string) error {
	t := p.peek()
	return &SyntaxError{Pos: t.pos, Found: t.describe(), Expected: expected}
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.fail(fmt.Sprintf("at most %d levels of nesting", maxDepth))
	}
	return nil
}

// parse reads the whole text as one expression.
func parse(src string) (node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if p.peek().kind == tEOF {
		return nil, p.fail("an expression")
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tEOF {
		return nil, p.fail("AND, OR or the end of the expression")
	}
	return n, nil
}

// or := and { OR and }
func (p *parser) or() (node, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.peek().keyword("OR") {
		p.next()
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = &logical{op: "OR", l: l, r: r}
	}
	return l, nil
}

// and := not { AND not }
func (p *parser) and() (node, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.peek().keyword("AND") {
		p.next()
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = &logical{op: "AND", l: l, r: r}
	}
	return l, nil
}

// not := NOT not | predicate
func (p *parser) not() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if t := p.peek(); t.keyword("NOT") {
		p.next()
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &negation{x: x, pos: t.pos}, nil
	}
	return p.predicate()
}

// predicate := operand [ op operand | [NOT] IN (literals) |
// [NOT] BETWEEN operand AND operand | IS [NOT] NULL ]
func (p *parser) predicate() (node, error) {
	x, err := p.operand()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	switch {
	case t.kind == tOp:
		p.next()
		r, err := p.operand()
		if err != nil {
			return nil, err
		}
		op := t.text
		if op == "!=" {
			op = "<>"
		}
		return &comparison{op: op, l: x, r: r, pos: t.pos}, nil
	case t.keyword("IS"):
		p.next()
		not := false
		if p.peek().keyword("NOT") {
			p.next()
			not = true
		}
		if !p.peek().keyword("NULL") {
			return nil, p.fail("NULL or NOT NULL after IS")
		}
		p.next()
		return &isNull{x: x, not: not, pos: t.pos}, nil
	case t.keyword("NOT"):
		p.next()
		switch u := p.peek(); {
		case u.keyword("IN"):
			return p.in(x, true, t.pos)
		case u.keyword("BETWEEN"):
			return p.between(x, true, t.pos)
		}
		return nil, p.fail("IN or BETWEEN after NOT")
	case t.keyword("IN"):
		return p.in(x, false, t.pos)
	case t.keyword("BETWEEN"):
		return p.between(x, false, t.pos)
	}
	return x, nil
}

func (p *parser) in(x node, not bool, pos int) (node, error) {
	p.next() // IN
	if p.peek().kind != tLParen {
		return nil, p.fail("( after IN")
	}
	p.next()
	n := &inList{x: x, not: not, pos: pos}
	for {
		l, err := p.literal()
		if err != nil {
			return nil, err
		}
		n.list = append(n.list, l)
		switch p.next().kind {
		case tComma:
			continue
		case tRParen:
			return n, nil
		}
		p.at--
		return nil, p.fail(", or ) in the IN list")
	}
}

func (p *parser) between(x node, not bool, pos int) (node, error) {
	p.next() // BETWEEN
	lo, err := p.operand()
	if err != nil {
		return nil, err
	}
	if !p.peek().keyword("AND") {
		return nil, p.fail("AND between the bounds of BETWEEN")
	}
	p.next()
	hi, err := p.operand()
	if err != nil {
		return nil, err
	}
	return &between{x: x, lo: lo, hi: hi, not: not, pos: pos}, nil
}

// operand := ( expression ) | column | literal
func (p *parser) operand() (node, error) {
	t := p.peek()
	switch {
	case t.kind == tLParen:
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		p.next()
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek().kind != tRParen {
			return nil, p.fail(") or an operator")
		}
		p.next()
		return x, nil
	case t.kind == tQuotedIdent:
		p.next()
		return &column{name: t.text, pos: t.pos}, nil
	case t.kind == tIdent && !keywords[strings.ToUpper(t.text)]:
		p.next()
		return &column{name: t.text, pos: t.pos}, nil
	}
	return p.literal()
}

// literal := number | 'string' | TRUE | FALSE | NULL | DATE 'x' | TIMESTAMP 'x'
func (p *parser) literal() (*literal, error) {
	t := p.peek()
	switch {
	case t.kind == tNumber:
		p.next()
		return numberLiteral(t)
	case t.kind == tString:
		p.next()
		return &literal{kind: litString, s: t.text, pos: t.pos}, nil
	case t.keyword("TRUE"), t.keyword("FALSE"):
		p.next()
		return &literal{kind: litBool, b: t.keyword("TRUE"), pos: t.pos}, nil
	case t.keyword("NULL"):
		p.next()
		return &literal{kind: litNull, pos: t.pos}, nil
	case t.keyword("DATE"), t.keyword("TIMESTAMP"):
		p.next()
		s := p.peek()
		if s.kind != tString {
			return nil, p.fail("a quoted value after " + strings.ToUpper(t.text))
		}
		p.next()
		k := litDate
		if t.keyword("TIMESTAMP") {
			k = litTimestamp
		}
		if _, err := parseTime(s.text, k == litDate); err != nil {
			return nil, &SyntaxError{Pos: s.pos, Found: s.describe(), Expected: err.Error()}
		}
		return &literal{kind: k, s: s.text, pos: t.pos}, nil
	}
	return nil, p.fail("a column, a literal or (")
}

func numberLiteral(t token) (*literal, error) {
	if !strings.ContainsAny(t.text, ".eE") {
		if i, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return &literal{kind: litNumber, isInt: true, i: i, pos: t.pos}, nil
		}
	}
	f, err := strconv.ParseFloat(t.text, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, &SyntaxError{Pos: t.pos, Found: t.describe(), Expected: "a number within float64's range"}
	}
	return &literal{kind: litNumber, f: f, pos: t.pos}, nil
}
