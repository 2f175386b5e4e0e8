package minrtt

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Value is a quantity in reference cycles with a strict bound: the truth lies
// in [Est-Err, Est+Err].
type Value struct{ Est, Err float64 }

// Method selects how Model bounds translations (see the package doc).
type Method int

const (
	// MethodBest intersects the Paper and AllProbes intervals (both strict,
	// so their intersection is strict). The default.
	MethodBest Method = iota
	// MethodPaper is the paper's two-MinRTT method (sections 3.2-3.3) in
	// its strict form.
	MethodPaper
	// MethodAllProbes intersects the constraints of every probe in both
	// directions.
	MethodAllProbes
)

func (m Method) String() string {
	switch m {
	case MethodBest:
		return "best"
	case MethodPaper:
		return "paper"
	case MethodAllProbes:
		return "allprobes"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Options configure NewModel.
type Options struct {
	// Ref is the reference node's name; "" chooses one: the node that took
	// part in the most rounds, then the one whose nodes translate into it
	// with the smallest total all-probes error at mid-experiment, then the
	// first name in sort order.
	Ref    string
	Method Method
	// SkipUnreachable keeps nodes that cannot be translated (no probes, or
	// no usable path to the reference) out of the model instead of failing
	// NewModel: Unreachable lists them with why, Point and Duration return
	// an error for them and the *Idx forms a NaN estimate with Err +Inf.
	SkipUnreachable bool
}

// Model translates TSC values and durations of every node into the
// reference node's TSC. It is immutable after NewModel and safe for
// concurrent use.
type Model struct {
	method Method
	names  []string
	index  map[string]int
	origin []uint64  // per node: centred value = reading - origin
	hz     []float64 // per node: TSC frequency as registered
	mid    []float64 // per node: centred mid-experiment reading
	ref    int
	links  []*link
	// reach: per node, whether it translates into the reference; unreach
	// says why not for the others (Options.SkipUnreachable).
	reach   []bool
	unreach map[string]string

	// Chosen paths, per method, as link indices from src to dst: index
	// src*n+dst. nil when dst is not reachable (or src == dst).
	paperPath, polyPath [][]int32
	paperOK, polyOK     []bool // per node: a path to ref exists

	// Ratio of each node's counter to the reference's along the path that
	// bounds it best: paper r +- dr, all-probes [rlo, rhi].
	paperR, paperDR  []float64
	polyRlo, polyRhi []float64
}

// NewModel builds the translation model from rounds (ReadRounds).
func NewModel(rounds []*Round, opt Options) (*Model, error) {
	if len(rounds) == 0 {
		return nil, errors.New("minrtt: no rounds")
	}
	switch opt.Method {
	case MethodBest, MethodPaper, MethodAllProbes:
	default:
		return nil, fmt.Errorf("minrtt: unknown method %d", int(opt.Method))
	}
	m := &Model{method: opt.Method, index: map[string]int{}, unreach: map[string]string{}}

	// Nodes: every name that registered or took part in a probe.
	hz := map[string]float64{}
	seen := map[string]bool{}
	for _, r := range rounds {
		for _, nd := range r.Nodes {
			seen[nd.Name] = true
			if nd.TSCHz > 0 {
				hz[nd.Name] = nd.TSCHz
			}
		}
		for _, d := range r.Dirs {
			if len(d.Probes) > 0 {
				seen[d.Origin], seen[d.Responder] = true, true
			}
		}
	}
	for name := range seen {
		m.names = append(m.names, name)
	}
	sort.Strings(m.names)
	n := len(m.names)
	for i, name := range m.names {
		m.index[name] = i
	}
	m.hz = make([]float64, n)
	for i, name := range m.names {
		m.hz[i] = hz[name]
	}

	// Origins: each node's smallest reading in any probe, so centred values
	// start near 0 and float64 keeps sub-cycle precision for months at GHz.
	m.origin = make([]uint64, n)
	top := make([]uint64, n)
	have := make([]bool, n)
	present := make([]map[int]bool, n)
	see := func(i int, c uint64) {
		if !have[i] || c < m.origin[i] {
			m.origin[i] = c
		}
		if !have[i] || c > top[i] {
			top[i] = c
		}
		have[i] = true
	}
	for ri, r := range rounds {
		for _, d := range r.Dirs {
			if len(d.Probes) == 0 || d.Origin == d.Responder {
				continue
			}
			o, p := m.index[d.Origin], m.index[d.Responder]
			for _, pr := range d.Probes {
				see(o, pr.Send)
				see(o, pr.Recv)
				see(p, pr.Resp)
			}
			for _, i := range []int{o, p} {
				if present[i] == nil {
					present[i] = map[int]bool{}
				}
				present[i][ri] = true
			}
		}
	}
	m.mid = make([]float64, n)
	for i := range m.names {
		if !have[i] {
			why := fmt.Sprintf("registered but answered no probe in %d round(s)", len(rounds))
			if !opt.SkipUnreachable || opt.Ref == m.names[i] {
				return nil, fmt.Errorf("minrtt: node %s %s", m.names[i], why)
			}
			m.unreach[m.names[i]] = why
		}
		m.mid[i] = float64(top[i]-m.origin[i]) / 2
	}

	// Samples per ordered (origin, responder) pair in centred coordinates.
	samples := map[[2]int][]sample{}
	for ri, r := range rounds {
		for _, d := range r.Dirs {
			if d.Origin == d.Responder {
				continue
			}
			o, p := m.index[d.Origin], m.index[d.Responder]
			for k, pr := range d.Probes {
				samples[[2]int{o, p}] = append(samples[[2]int{o, p}], sample{
					round: ri, send: m.x(o, pr.Send), resp: m.x(p, pr.Resp), rv: m.x(o, pr.Recv),
					kernel: len(d.UserProbes) == len(d.Probes) && pr != d.UserProbes[k],
				})
			}
		}
	}
	// Links: both directions of every pair that probed at all.
	var why []string
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			fwd, rev := samples[[2]int{i, j}], samples[[2]int{j, i}]
			if len(fwd)+len(rev) == 0 {
				continue
			}
			hzRatio := 1.0
			if m.hz[i] > 0 && m.hz[j] > 0 {
				hzRatio = m.hz[i] / m.hz[j]
			}
			l, err := buildLink(i, j, m.names, hzRatio, fwd, rev)
			if err != nil {
				return nil, err
			}
			m.links = append(m.links, l)
			if !l.polyOK {
				why = append(why, l.polyWhy)
			} else if !l.paperOK {
				why = append(why, l.paperWhy+" (the all-probes method can still use it)")
			}
		}
	}

	// Paths between every pair of nodes, by the bound at the source's
	// mid-experiment reading (paths.go).
	m.paperPath, m.polyPath = make([][]int32, n*n), make([][]int32, n*n)
	polyCost := make([]float64, n*n)
	for src := 0; src < n; src++ {
		pp, _ := m.pointPaths(src, false)
		qp, qc := m.pointPaths(src, true)
		for dst := 0; dst < n; dst++ {
			m.paperPath[src*n+dst], m.polyPath[src*n+dst] = pp[dst], qp[dst]
			polyCost[src*n+dst] = qc[dst]
		}
	}

	// The reference node.
	if opt.Ref != "" {
		ref, ok := m.index[opt.Ref]
		if !ok {
			return nil, fmt.Errorf("minrtt: reference node %q is not in the rounds (nodes: %s)", opt.Ref, strings.Join(m.names, ", "))
		}
		m.ref = ref
	} else {
		best, bestCost := -1, 0.0
		for c := 0; c < n; c++ {
			cost := 0.0
			for s := 0; s < n; s++ {
				if s != c {
					cost += polyCost[s*n+c]
				}
			}
			if best < 0 || len(present[c]) > len(present[best]) ||
				len(present[c]) == len(present[best]) && cost < bestCost {
				best, bestCost = c, cost
			}
		}
		m.ref = best
	}

	if !have[m.ref] {
		return nil, fmt.Errorf("minrtt: the reference node %s answered no probe", m.names[m.ref])
	}

	// Every node must reach the reference.
	m.paperOK, m.polyOK, m.reach = make([]bool, n), make([]bool, n), make([]bool, n)
	var lost []string
	for i := 0; i < n; i++ {
		m.paperOK[i] = i == m.ref || m.paperPath[i*n+m.ref] != nil
		m.polyOK[i] = i == m.ref || m.polyPath[i*n+m.ref] != nil
		m.reach[i] = m.polyOK[i]
		if opt.Method == MethodPaper {
			m.reach[i] = m.paperOK[i]
		}
		if !m.reach[i] && have[i] {
			lost = append(lost, m.names[i])
		}
	}
	if len(lost) > 0 {
		msg := fmt.Sprintf("no path to the reference node %s with the %s method", m.names[m.ref], opt.Method)
		if len(why) > 0 {
			msg += "; unusable links: " + strings.Join(why, "; ")
		}
		if !opt.SkipUnreachable {
			return nil, fmt.Errorf("minrtt: %s: %s", strings.Join(lost, ", "), msg)
		}
		for _, name := range lost {
			m.unreach[name] = msg
		}
	}

	// Ratios into the reference.
	m.paperR, m.paperDR = make([]float64, n), make([]float64, n)
	m.polyRlo, m.polyRhi = make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		m.paperR[i], m.paperDR[i] = m.ratioPaper(i)
		m.polyRlo[i], m.polyRhi[i] = m.ratioPoly(i)
	}
	return m, nil
}

// x is node i's reading c in centred coordinates. The wrap-around
// difference read as int64 is exact for readings on either side of the
// origin; float64 is exact up to 2^53 cycles from it (a month at 3 GHz).
func (m *Model) x(i int, c uint64) float64 { return float64(int64(c - m.origin[i])) }

// Unreachable lists the nodes left out with Options.SkipUnreachable, with
// why; empty otherwise.
func (m *Model) Unreachable() map[string]string {
	out := map[string]string{}
	for k, v := range m.unreach {
		out[k] = v
	}
	return out
}

// Reaches says whether node i translates into the reference (false only
// for the nodes Options.SkipUnreachable left out).
func (m *Model) Reaches(i int) bool { return m.reach[i] }

// lookup is the index of a node that translates, or an error.
func (m *Model) lookup(node string) (int, error) {
	i, ok := m.index[node]
	if !ok {
		return -1, fmt.Errorf("minrtt: unknown node %q", node)
	}
	if !m.reach[i] {
		return -1, fmt.Errorf("minrtt: node %s does not translate into %s: %s", node, m.names[m.ref], m.unreach[node])
	}
	return i, nil
}

// Ref is the reference node's name.
func (m *Model) Ref() string { return m.names[m.ref] }

// RefIndex is the reference node's index.
func (m *Model) RefIndex() int { return m.ref }

// RefHz is the reference node's TSC frequency as it registered (Node.TSCHz):
// divide reference cycles by it for seconds. 0 if it never said.
func (m *Model) RefHz() float64 { return m.hz[m.ref] }

// RefOrigin is the reference reading that PointRel values are relative to.
func (m *Model) RefOrigin() uint64 { return m.origin[m.ref] }

// Method is the method the model reports values with.
func (m *Model) Method() Method { return m.method }

// Nodes are the node names, sorted; a node's index is its position.
func (m *Model) Nodes() []string { return append([]string(nil), m.names...) }

// NodeIndex is the index of the named node for the *Idx methods, or -1.
func (m *Model) NodeIndex(name string) int {
	if i, ok := m.index[name]; ok {
		return i
	}
	return -1
}

// Link is one ordered node pair for a report: what translating From's
// counter into Into's rests on. Cycles are Into's unless said otherwise.
type Link struct {
	Into, From string
	Rounds     int // rounds with probes between the two, either way
	Probes     int // answered probes between the two, either way
	// KernelProbes is how many of Probes the kernels timed (kernel
	// timestamps, Direction.Timestamps); the others the processes did.
	KernelProbes int
	MinRTT       float64 // min RTT of probes Into sent to From (NaN if none)
	MinRTTRev    float64 // min RTT of probes From sent to Into, in From's cycles (NaN if none)
	// The paper's anchors (one per round, from Into's min-RTT probe to
	// From): their error e (RTT/2 plus quantization slack), by time.
	AnchorErr []float64
	// The paper's ratio r_From^Into (Eq. 2) and its strict error.
	Ratio, RatioErr float64
	// The all-probes ratio interval.
	RatioLo, RatioHi float64
	// Errors translating From's mid-experiment reading into Into over this
	// link alone: paper form and all-probes.
	PaperErrMid, AllProbesErrMid float64
	// Used: some chosen path of the model's method goes through the link.
	Used bool
	// Unusable says why a method cannot use the link ("" if both can).
	Unusable string
}

// Links lists every ordered pair that probed, for a report.
func (m *Model) Links() []Link {
	n := len(m.names)
	used := make([]bool, len(m.links))
	for s := 0; s < n; s++ {
		for dst := 0; dst < n; dst++ {
			if m.method != MethodAllProbes {
				for _, li := range m.paperPath[s*n+dst] {
					used[li] = true
				}
			}
			if m.method != MethodPaper {
				for _, li := range m.polyPath[s*n+dst] {
					used[li] = true
				}
			}
		}
	}
	var out []Link
	for i, l := range m.links {
		k := Link{
			Into: m.names[l.into], From: m.names[l.from],
			Rounds: l.rounds, Probes: l.probes, KernelProbes: l.kernelProbes, MinRTT: l.minRTT, MinRTTRev: l.minRTTRev,
			Ratio: math.NaN(), RatioErr: math.NaN(), RatioLo: math.NaN(), RatioHi: math.NaN(),
			PaperErrMid: math.NaN(), AllProbesErrMid: math.NaN(), Used: used[i],
		}
		for _, a := range l.anch {
			k.AnchorErr = append(k.AnchorErr, a.d)
		}
		var why []string
		if l.paperOK {
			k.Ratio, k.RatioErr = l.pr, l.pdr
			k.PaperErrMid = l.paperErrAt(m.mid[l.from])
		} else {
			why = append(why, "paper: "+l.paperWhy)
		}
		if l.polyOK {
			k.RatioLo, k.RatioHi = l.rlo, l.rhi
			k.AllProbesErrMid = l.polyErrAt(m.mid[l.from])
		} else {
			why = append(why, "all-probes: "+l.polyWhy)
		}
		k.Unusable = strings.Join(why, "; ")
		out = append(out, k)
	}
	return out
}

// Path is the chain of nodes, from node to the reference, that values of
// node follow in the given method's form (MethodBest: the all-probes path;
// the paper-form numbers take the paper path). nil for the reference.
func (m *Model) Path(node string, method Method) ([]string, error) {
	i, ok := m.index[node]
	if !ok {
		return nil, fmt.Errorf("minrtt: unknown node %q", node)
	}
	if i == m.ref {
		return nil, nil
	}
	p := m.polyPath[i*len(m.names)+m.ref]
	if method == MethodPaper {
		p = m.paperPath[i*len(m.names)+m.ref]
	}
	if p == nil {
		return nil, fmt.Errorf("minrtt: no %s path from %s to %s", method, node, m.names[m.ref])
	}
	out := []string{node}
	for _, li := range p {
		out = append(out, m.names[m.links[li].into])
	}
	return out, nil
}

// NewSingleNodeModel is the model of one node and no rounds: its own
// counter is the reference, every translation is exact (what one process,
// or one machine's processes, such as a Flink MiniCluster or a Storm
// LocalCluster, need). origin is a reading near the data (its earliest), so
// centred values keep sub-cycle precision; hz is the node's registered TSC
// frequency (0 if unknown).
func NewSingleNodeModel(name string, hz float64, origin uint64, method Method) (*Model, error) {
	switch method {
	case MethodBest, MethodPaper, MethodAllProbes:
	default:
		return nil, fmt.Errorf("minrtt: unknown method %d", int(method))
	}
	if name == "" {
		return nil, errors.New("minrtt: a node needs a name")
	}
	return &Model{
		method: method, names: []string{name}, index: map[string]int{name: 0}, unreach: map[string]string{},
		origin: []uint64{origin}, hz: []float64{hz}, mid: []float64{0}, ref: 0, reach: []bool{true},
		paperPath: make([][]int32, 1), polyPath: make([][]int32, 1), paperOK: []bool{true}, polyOK: []bool{true},
		paperR: []float64{1}, paperDR: []float64{0}, polyRlo: []float64{1}, polyRhi: []float64{1},
	}, nil
}
