package analyze

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"cloudprofiler/minrtt"
)

// Logs that contradict each other are refused, never turned into numbers.
// Each case below once gave confident nonsense with exit 0: two machines
// under one node name (a 770 s "transfer", bound 0), two TSC rates for one
// node (medians of 2,600 s), two runs in one directory joined on their
// tuple ids (0.58 s where each run took 2 us), a TSC that went back 1 s
// (negative durations, bound 0). What can be checked from the headers and
// the rounds is checked before decoding (checkHeaders); what needs the
// records, after it and before the join (checkRecords).

// ErrContradiction: the logs contradict each other, and the analysis wrote
// nothing. The message lists each contradiction.
var ErrContradiction = errors.New("the logs contradict each other")

// Thresholds. A node's files read one counter, so their TSC rates agree
// within the error of measuring a rate (calibrated over 50 ms, at worst
// about 1e-4); 1% apart is two counters.
const rateTolerance = 0.01

// A writer of a shared channel reads the TSC before it takes its place in
// the ring, so a record may trail the one before it by as long as that
// writer was preempted in between: milliseconds on a loaded machine. A
// step back of more than maxStepBack is no preemption but another clock.
const maxStepBack = 100 * time.Millisecond

type contradictions []string

func (cs *contradictions) add(format string, args ...any) {
	*cs = append(*cs, fmt.Sprintf(format, args...))
}

func (cs contradictions) err() error {
	if len(cs) == 0 {
		return nil
	}
	return fmt.Errorf("analyze: %w; nothing was written:\n  - %s", ErrContradiction, strings.Join(cs, "\n  - "))
}

// checkHeaders refuses, from the files' headers and the rounds: files of
// different runs (CP_RUN); a node name whose files or rounds come from
// more than one TSC (tsc_domain: two machines, or a reboot, under one
// name), or whose files disagree on the TSC rate; and, for files without
// a tsc_domain (older ones), a node's files whose TSCs at open disagree
// with their open times by the wall clock.
func checkHeaders(chans []*Channel, rounds []*minrtt.Round, oneRun bool) error {
	var cs contradictions
	runs := map[string][]*Channel{}
	var runNames []string
	for _, c := range chans {
		if r := c.Header.Run; r != "" {
			if runs[r] == nil {
				runNames = append(runNames, r)
			}
			runs[r] = append(runs[r], c)
		}
	}
	// --one-run says they are one run all the same (a launcher that gave
	// each process a name of its own, not the job's).
	if len(runNames) > 1 && !oneRun {
		var parts []string
		for _, r := range runNames {
			parts = append(parts, fmt.Sprintf("%q (%d files, e.g. %s)", r, len(runs[r]), runs[r][0].Path))
		}
		cs.add("files of %d runs (CP_RUN): %s: analyze each run on its own; CP_RUN names the run, one name for every process of it (a launcher that gives each process a name of its own splits one run): if these files are one run, --one-run takes them as one", len(runNames), strings.Join(parts, ", "))
	}

	byNode := map[string][]*Channel{}
	var nodes []string
	for _, c := range chans {
		if byNode[c.Node] == nil {
			nodes = append(nodes, c.Node)
		}
		byNode[c.Node] = append(byNode[c.Node], c)
	}
	roundDomains := map[string]map[string]string{} // node -> domain -> "host H (rounds)"
	for _, r := range rounds {
		for _, n := range r.Nodes {
			if n.TSCDomain == "" {
				continue
			}
			if roundDomains[n.Name] == nil {
				roundDomains[n.Name] = map[string]string{}
			}
			roundDomains[n.Name][n.TSCDomain] = fmt.Sprintf("tsc-client on host %s (round %d)", n.Host, r.Round)
		}
	}
	sort.Strings(nodes)
	for _, node := range nodes {
		fs := byNode[node]
		// One counter per node name.
		where := map[string]string{}
		var domains []string
		allKnown := true
		for _, c := range fs {
			d := c.Header.TSCDomain
			if d == "" {
				allKnown = false
				continue
			}
			if _, ok := where[d]; !ok {
				domains = append(domains, d)
				where[d] = fmt.Sprintf("%s (host %s)", c.Path, c.Header.Host)
			}
		}
		for d, w := range roundDomains[node] {
			if _, ok := where[d]; !ok {
				domains = append(domains, d)
				where[d] = w
			}
		}
		if len(domains) > 1 {
			sort.Strings(domains)
			var parts []string
			for _, d := range domains {
				parts = append(parts, fmt.Sprintf("%q in %s", d, where[d]))
			}
			cs.add("node %s: its TSCs come from %d clocks: %s: two machines (or a reboot) under one node name; give each machine its own CP_NODE and tsc-client --node",
				node, len(domains), strings.Join(parts, "; "))
		}
		// One rate.
		var lo, hi *Channel
		for _, c := range fs {
			if c.Hz > 0 && (lo == nil || c.Hz < lo.Hz) {
				lo = c
			}
			if c.Hz > 0 && (hi == nil || c.Hz > hi.Hz) {
				hi = c
			}
		}
		if lo != nil && hi.Hz > lo.Hz*(1+rateTolerance) {
			cs.add("node %s: its files disagree on the TSC rate: %.6f GHz (%s, %s) and %.6f GHz (%s, %s): one node has one counter",
				node, lo.Hz/1e9, lo.Path, lo.Header.TSCHzSource, hi.Hz/1e9, hi.Path, hi.Header.TSCHzSource)
		}
		if !allKnown {
			checkOpenTimes(&cs, node, fs)
		}
	}
	return cs.err()
}

// checkOpenTimes compares, for a node's files, the time between their opens
// by the wall clock with the time their TSCs say (each header's open sync
// is a TSC and a wall-clock reading taken together): one counter keeps
// them within a second plus 0.1% (the rate's error, clock slew).
func checkOpenTimes(cs *contradictions, node string, fs []*Channel) {
	var first *Channel
	for _, c := range fs {
		s := c.Header.OpenSync
		if c.Hz <= 0 || s.RealtimeNs == 0 || s.TSC == 0 {
			continue
		}
		if first == nil || s.RealtimeNs < first.Header.OpenSync.RealtimeNs {
			first = c
		}
	}
	if first == nil {
		return
	}
	f := first.Header.OpenSync
	for _, c := range fs {
		s := c.Header.OpenSync
		if c == first || c.Hz <= 0 || s.RealtimeNs == 0 || s.TSC == 0 {
			continue
		}
		wall := float64(s.RealtimeNs-f.RealtimeNs) / 1e9
		byTSC := float64(int64(s.TSC-f.TSC)) / first.Hz
		if math.Abs(byTSC-wall) > 1+1e-3*math.Abs(wall) {
			cs.add("node %s: %s opened %.3f s after %s by the wall clock, but %.3f s after it by their TSCs: two clocks under one node name (two machines, or a reboot)",
				node, c.Path, wall, first.Path, byTSC)
			return // one example a node
		}
	}
}

// checkRecords refuses, from what decoding found: a channel whose TSC goes
// back by more than maxStepBack; and tuple ids of two runs in one analysis:
// the tuple channels' spans (first to last record, in the reference clock)
// fall into groups with no channel logging between them, and some channel
// (node and name) logged in more than one group: it was opened again after
// everything had closed. Said unless every file names one run (CP_RUN) or
// the user says it is one (--one-run).
func (a *analysis) checkRecords() error {
	var cs contradictions
	for i, c := range a.chans {
		if back := a.stepBack[i]; c.Hz > 0 && float64(back.cycles) > c.Hz*maxStepBack.Seconds() {
			cs.add("%s: the TSC goes back %.3f s at record %d (from %d to %d): not one clock (a file written across a reboot or a VM's migration, or pieced together from two)",
				c.Path, float64(back.cycles)/c.Hz, back.record, back.from, back.from-back.cycles)
		}
	}
	if !a.cfg.OneRun && !a.oneNamedRun() {
		a.checkRuns(&cs)
	}
	return cs.err()
}

// stepBack is the largest step back of a channel's TSC: at which record,
// from what running maximum, by how many cycles.
type stepBack struct {
	record, from, cycles uint64
}

// oneNamedRun says whether every file names the same run (CP_RUN).
func (a *analysis) oneNamedRun() bool {
	for _, c := range a.chans {
		if c.Header.Run == "" || c.Header.Run != a.chans[0].Header.Run {
			return false
		}
	}
	return true
}

// checkRuns groups the tuple channels by their spans in the reference clock.
func (a *analysis) checkRuns(cs *contradictions) {
	type span struct {
		lo, hi float64
		ch     int
	}
	var spans []span
	for i, c := range a.chans {
		if (c.Role != RoleTuples && c.Role != RoleReturn) || a.chanRecords[i] == 0 {
			continue
		}
		lo := a.model.PointRelIdx(c.node, a.tscMin[i]).Est
		hi := a.model.PointRelIdx(c.node, a.tscMax[i]).Est
		spans = append(spans, span{lo, hi, i})
	}
	sort.Slice(spans, func(x, y int) bool { return spans[x].lo < spans[y].lo })
	type group struct {
		lo, hi float64
		chans  []int
	}
	var groups []group
	for _, s := range spans {
		if n := len(groups); n > 0 && s.lo <= groups[n-1].hi {
			groups[n-1].hi = max(groups[n-1].hi, s.hi)
			groups[n-1].chans = append(groups[n-1].chans, s.ch)
			continue
		}
		groups = append(groups, group{s.lo, s.hi, []int{s.ch}})
	}
	// A run ends where a group holds a channel an earlier group of the run
	// already held: the channel was opened again after everything closed.
	// (Groups without such a channel are processes that ran one after
	// another, as a test on one machine may play a pipeline's nodes.)
	type run struct {
		lo, hi float64
		files  int
		first  int             // a channel of the run, for the message
		seen   map[string]bool // its channels' node/name (a process restarted has another pid, the same channel)
	}
	var runs []*run
	var again []string
	for _, gr := range groups {
		var cur *run
		if n := len(runs); n > 0 {
			cur = runs[n-1]
			repeated := false
			for _, ch := range gr.chans {
				if l := a.chans[ch].nodeName(); cur.seen[l] {
					if !slices.Contains(again, l) {
						again = append(again, l)
					}
					repeated = true
				}
			}
			if repeated {
				cur = nil
			}
		}
		if cur == nil {
			cur = &run{lo: gr.lo, first: gr.chans[0], seen: map[string]bool{}}
			runs = append(runs, cur)
		}
		cur.hi = gr.hi
		cur.files += len(gr.chans)
		for _, ch := range gr.chans {
			cur.seen[a.chans[ch].nodeName()] = true
		}
	}
	if len(runs) < 2 {
		return
	}
	hz := a.model.RefHz()
	var parts []string
	for k, r := range runs {
		parts = append(parts, fmt.Sprintf("run %d: %d files over %.3f s, e.g. %s", k+1, r.files, (r.hi-r.lo)/hz, a.chans[r.first].Path))
	}
	more := ""
	if len(again) > 3 {
		more = fmt.Sprintf(" and %d more", len(again)-3)
		again = again[:3]
	}
	cs.add("the logs hold %d runs: no channel logged in the %.3f s between the first two, and %s%s logged in both: %s. "+
		"Analyze each run on its own (its files in a directory of their own, or named after --logs); a launcher can name each run with CP_RUN; --one-run if it is one run",
		len(runs), (runs[1].lo-runs[0].hi)/hz, strings.Join(again, ", "), more, strings.Join(parts, "; "))
}
