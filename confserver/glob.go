package confserver

import (
	"errors"
	"fmt"
	"strings"
)

// Size bounds of what a rule matches and what a channel asks with (API.md,
// "Limits"): with them and the matcher below, one match costs at most
// MaxName steps of ceil((MaxGlob+1)/64) machine words.
const (
	MaxGlob = 1024 // bytes of a rule's name or host pattern
	MaxName = 4096 // bytes of a channel name (the library's own bound)
	MaxHost = 255  // bytes of a host name
)

var errBadGlob = errors.New("glob ends in a lone backslash")

func checkGlob(g string) error {
	if len(g) > MaxGlob {
		return fmt.Errorf("glob of %d bytes; at most %d", len(g), MaxGlob)
	}
	n := len(g) - len(strings.TrimRight(g, `\`))
	if n%2 == 1 { // an odd run of trailing backslashes: the last escapes nothing
		return fmt.Errorf("%q: %w", g, errBadGlob)
	}
	return nil
}

// Match reports whether s matches the glob: '*' any run of bytes (also '/'),
// '?' one byte, '\' makes the next byte literal (a lone '\' at the end is a
// literal backslash; rules refuse such globs). It takes time linear in
// len(s) for a given glob and never backtracks (see glob).
func Match(glob, s string) bool { return compileGlob(glob).match(s) }

// glob is a compiled pattern: a bit-parallel automaton (Shift-And, with
// stars). Tokens t_0..t_{m-1} are literal bytes, '?' or '*' (runs of '*'
// are one); bit j of the state set means "t_0..t_{j-1} match the bytes
// read so far". Each byte of the name updates every bit at once, word by
// word: a match costs len(s) * words steps, whatever the pattern, where a
// backtracking matcher takes up to len(s) * len(glob) and more.
type glob struct {
	m       int
	words   int         // ceil((m+1)/64)
	class   [256]uint16 // byte -> its row of masks (0: bytes no literal names)
	masks   []uint64    // rows of words: positions j whose token takes that byte (a literal or '?')
	star    []uint64    // positions j whose token is '*'
	endStar bool        // the last token is '*': reaching it matches any rest
}

func compileGlob(p string) *glob {
	type token struct {
		b    byte
		kind byte // 'l' literal, '?', '*'
	}
	var toks []token
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '*':
			if len(toks) == 0 || toks[len(toks)-1].kind != '*' {
				toks = append(toks, token{kind: '*'})
			}
		case c == '?':
			toks = append(toks, token{kind: '?'})
		case c == '\\' && i+1 < len(p):
			i++
			toks = append(toks, token{b: p[i], kind: 'l'})
		default:
			toks = append(toks, token{b: c, kind: 'l'})
		}
	}
	g := &glob{m: len(toks), words: (len(toks) + 1 + 63) / 64}
	g.endStar = g.m > 0 && toks[g.m-1].kind == '*'
	rows := 1
	for _, t := range toks {
		if t.kind == 'l' && g.class[t.b] == 0 {
			g.class[t.b] = uint16(rows)
			rows++
		}
	}
	g.masks = make([]uint64, rows*g.words)
	g.star = make([]uint64, g.words)
	for j, t := range toks {
		w, bit := j/64, uint64(1)<<(j%64)
		switch t.kind {
		case '*':
			g.star[w] |= bit
		case '?':
			for r := 0; r < rows; r++ {
				g.masks[r*g.words+w] |= bit
			}
		default:
			g.masks[int(g.class[t.b])*g.words+w] |= bit
		}
	}
	return g
}

// match runs the automaton over s.
func (g *glob) match(s string) bool {
	ok, _ := g.matchSteps(s)
	return ok
}

// matchSteps is match, also counting the word operations it did (the tests
// hold it to len(s) * words).
func (g *glob) matchSteps(s string) (bool, int) {
	if g.words == 1 {
		return g.match1(s)
	}
	cur := make([]uint64, g.words)
	next := make([]uint64, g.words)
	cur[0] = 1
	g.closure(cur)
	last, lastBit := g.m/64, uint64(1)<<(g.m%64)
	steps := 0
	for i := 0; i < len(s); i++ {
		if g.endStar && cur[last]&lastBit != 0 {
			return true, steps
		}
		row := g.masks[int(g.class[s[i]])*g.words:][:g.words]
		var carry, any uint64
		for w := range cur {
			t := cur[w] & row[w]
			next[w] = t<<1 | carry | cur[w]&g.star[w]
			carry = t >> 63
			any |= next[w]
		}
		steps += g.words
		if any == 0 {
			return false, steps
		}
		g.closure(next)
		cur, next = next, cur
	}
	return cur[last]&lastBit != 0, steps
}

// closure: a star matches the empty run too, so being before a '*' is
// being after it as well (one step: runs of '*' are one token).
func (g *glob) closure(d []uint64) {
	var carry uint64
	for w := range d {
		t := d[w] & g.star[w]
		d[w] |= t<<1 | carry
		carry = t >> 63
	}
}

// match1: the same for patterns of at most 63 tokens (one word), the
// usual case, without slices.
func (g *glob) match1(s string) (bool, int) {
	star := g.star[0]
	final := uint64(1) << g.m
	cur := uint64(1)
	cur |= (cur & star) << 1
	for i := 0; i < len(s); i++ {
		if g.endStar && cur&final != 0 {
			return true, i
		}
		cur = (cur&g.masks[g.class[s[i]]])<<1 | cur&star
		if cur == 0 {
			return false, i + 1
		}
		cur |= (cur & star) << 1
	}
	return cur&final != 0, len(s)
}
