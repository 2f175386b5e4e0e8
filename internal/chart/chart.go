// Package chart draws the report's line charts as inline SVG: one or more
// series over a linear or logarithmic axis each, with ticks, a legend, and
// each point's value in a <title> (a browser shows it on hover, no script).
// It knows nothing of profiles: `analyze`'s report gives it numbers.
//
// Every chart is an <svg class="chart" data-chart=ID data-series=N>, each
// series a <polyline class="series" data-name=NAME> (or, for a series of
// one point, a <circle class="series">), so that a test reading the page's
// DOM can count what was drawn.
package chart

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Palette is the series' colours, in order (then again).
var Palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// Series is one line: its name, and its points (NaN or, on a log axis,
// non-positive values are gaps).
type Series struct {
	Name  string
	X, Y  []float64
	Color string // "" takes the palette's next
	Dash  bool   // a dashed line (a second statistic of the same thing)
}

// Axis is one axis: its label, log or linear, and how a value is written.
type Axis struct {
	Label  string
	Log    bool
	Format func(float64) string // nil: %.3g
	Min    float64              // with Max: a fixed range (0, 0: from the data)
	Max    float64
}

// Chart is a whole chart.
type Chart struct {
	ID            string // data-chart
	Title         string
	X, Y          Axis
	Series        []Series
	Width, Height int // the plot area, pixels (default 760 x 220)
}

const left, top, right, bottom = 78, 26, 16, 40

// SVG writes the chart to b.
func (c *Chart) SVG(b *strings.Builder) {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 760
	}
	if h == 0 {
		h = 220
	}
	xlo, xhi := c.X.span(c.Series, true)
	ylo, yhi := c.Y.span(c.Series, false)
	px := func(v float64) float64 { return left + c.X.frac(v, xlo, xhi)*float64(w) }
	py := func(v float64) float64 { return top + (1-c.Y.frac(v, ylo, yhi))*float64(h) }
	// The legend: three columns, or two when names are long.
	cols := 3
	for _, s := range c.Series {
		if len([]rune(s.Name)) > w/3/7 {
			cols = 2
		}
	}
	legendRows := (len(c.Series) + cols - 1) / cols
	fmt.Fprintf(b, `<svg class="chart" data-chart="%s" data-series="%d" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="%s">`,
		esc(c.ID), len(c.Series), left+w+right, top+h+bottom+18*legendRows, left+w+right, top+h+bottom+18*legendRows, esc(c.Title))
	fmt.Fprintf(b, `<text x="%d" y="16" font-weight="bold">%s</text>`, left, esc(c.Title))
	// Grid and ticks.
	for _, v := range c.X.ticks(xlo, xhi) {
		x := px(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e6e6e6"/><text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>`,
			x, top, x, top+h, x, top+h+14, esc(c.X.format(v)))
	}
	for _, v := range c.Y.ticks(ylo, yhi) {
		y := py(v)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e6e6e6"/><text x="%d" y="%.1f" text-anchor="end" fill="#444">%s</text>`,
			left, y, left+w, y, left-4, y+4, esc(c.Y.format(v)))
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, left, top, w, h)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" fill="#222">%s</text>`, left+w/2, top+h+30, esc(c.X.Label))
	fmt.Fprintf(b, `<text transform="translate(14 %d) rotate(-90)" text-anchor="middle" fill="#222">%s</text>`, top+h/2, esc(c.Y.Label))
	for i, s := range c.Series {
		color := s.Color
		if color == "" {
			color = Palette[i%len(Palette)]
		}
		var pts []string
		var one [2]float64
		for k := range s.X {
			x, y := s.X[k], s.Y[k]
			if !c.X.ok(x) || !c.Y.ok(y) {
				continue
			}
			one = [2]float64{px(x), py(y)}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", one[0], one[1]))
		}
		dash := ""
		if s.Dash {
			dash = ` stroke-dasharray="5 3"`
		}
		switch len(pts) {
		case 0:
			// Nothing to draw: still a mark, so that the count holds.
			fmt.Fprintf(b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" points=""><title>%s: no values</title></polyline>`, esc(s.Name), color, esc(s.Name))
		case 1:
			fmt.Fprintf(b, `<circle class="series" data-name="%s" cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s</title></circle>`, esc(s.Name), one[0], one[1], color, esc(s.Name))
		default:
			fmt.Fprintf(b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="1.6"%s points="%s"><title>%s</title></polyline>`,
				esc(s.Name), color, dash, strings.Join(pts, " "), esc(s.Name))
		}
		lx, ly := left-60+(i%cols)*((w+60)/cols), top+h+bottom+18*(i/cols)+4
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`,
			lx, ly, lx+18, ly, color, dash, lx+22, ly+4, esc(trimMiddle(s.Name, ((w+60)/cols-30)/6)))
	}
	b.WriteString("</svg>")
}

func esc(s string) string { return html.EscapeString(s) }

// trimMiddle keeps a long name's start and end around an ellipsis: its
// kind and its last channel both stay readable.
func trimMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 8 {
		return s
	}
	head := n / 3
	return string(r[:head]) + "…" + string(r[len(r)-(n-head-1):])
}

func (a *Axis) ok(v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	return !a.Log || v > 0
}

// span is the axis's range: fixed, or the data's (a log axis from the
// decade below the smallest value to the one above the largest).
func (a *Axis) span(ss []Series, x bool) (lo, hi float64) {
	if a.Min != 0 || a.Max != 0 {
		return a.Min, a.Max
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		vs := s.Y
		if x {
			vs = s.X
		}
		for _, v := range vs {
			if a.ok(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		if a.Log {
			return 1, 10
		}
		return 0, 1
	}
	if a.Log {
		// The nearest 1, 2 or 5 times a power of ten outside the data.
		lo, hi = nice(lo, false), nice(hi, true)
		if hi <= lo {
			hi = lo * 10
		}
		return lo, hi
	}
	if lo > 0 && lo < hi/2 {
		lo = 0 // a rate or a time from 0
	}
	if hi <= lo {
		hi = lo + 1
		if hi == lo { // past 2^53 a 1 adds nothing (every point at NaN)
			hi = lo + math.Abs(lo)*1e-6
		}
	}
	return lo, hi
}

// nice is the largest 1, 2 or 5 times a power of ten at or below v (at or
// above it, up).
func nice(v float64, up bool) float64 {
	d := math.Pow(10, math.Floor(math.Log10(v)))
	ms := []float64{1, 2, 5, 10}
	if up {
		for _, m := range ms {
			if m*d >= v*(1-1e-12) {
				return m * d
			}
		}
		return 10 * d
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i]*d <= v*(1+1e-12) {
			return ms[i] * d
		}
	}
	return d
}

func (a *Axis) frac(v, lo, hi float64) float64 {
	var f float64
	if a.Log {
		f = (math.Log10(v) - math.Log10(lo)) / (math.Log10(hi) - math.Log10(lo))
	} else {
		f = (v - lo) / (hi - lo)
	}
	return math.Max(0, math.Min(1, f))
}

// ticks: each decade (1, 2, 5 within it when there are few decades) on a
// log axis; 1, 2 or 5 times a power of ten, about six, on a linear one.
func (a *Axis) ticks(lo, hi float64) []float64 {
	var ts []float64
	if a.Log {
		decades := math.Log10(hi) - math.Log10(lo)
		for d := math.Floor(math.Log10(lo)); d <= math.Ceil(math.Log10(hi)); d++ {
			for _, m := range []float64{1, 2, 5} {
				if m != 1 && decades > 3 {
					continue
				}
				v := m * math.Pow(10, d)
				if v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
					ts = append(ts, v)
				}
			}
		}
		return ts
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/6)))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= 7 {
			step *= m
			break
		}
	}
	// Each tick from the first by multiplication, at most ten: a step
	// below the values' precision (a range of 32 around 1e17, or one of
	// equal values near 2^52) left v += step where it was, and the loop
	// appended ticks until memory ran out.
	first := math.Ceil(lo/step) * step
	for i := 0; i < 10; i++ {
		v := first + float64(i)*step
		if !(v <= hi+step*1e-9) {
			break
		}
		if n := len(ts); n == 0 || v != ts[n-1] {
			ts = append(ts, v)
		}
	}
	return ts
}

func (a *Axis) format(v float64) string {
	if a.Format != nil {
		return a.Format(v)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
