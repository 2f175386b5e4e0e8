package capacity

import (
	"fmt"
	"sort"
	"strconv"
)

// Channel is one channel file of the analysis, as the plan needs it; its
// place in the slice given to NewPlan is its index, the one events carry.
type Channel struct {
	Node string // the file header's node (CP_NODE), else its host
	PID  int
	Name string
	Path string
	// Tuples: a tuple channel, its records joined by tuple id (in, out and
	// sent marks must be one). ServiceRate: a CP_SERVICERATE counter channel
	// (count marks must be one). Lineage: a CP_LINEAGE channel (lineage
	// marks must be one; it is not a tuple channel). A mark on a channel of
	// another kind is ignored, and said so (Plan.Ignored).
	Tuples, ServiceRate, Lineage bool
	// Internal: a file that belongs to another channel (a FOX_START
	// channel's return log, which shares its name): never a mark.
	Internal bool
}

// Instance is one operator instance: (node, pid, operator, instance).
type Instance struct {
	Node     string
	PID      int
	Operator string
	Name     string // INSTANCE: what follows '#' ("" without one)
	Op       int    // index into Plan.Operators
	// Chans holds the channel index of each role (Chans[RoleIn] ...), -1
	// where the instance has no such channel.
	Chans [numRoles]int
}

// Label is how rows name the instance: node/pid/INSTANCE.
func (in *Instance) Label() string {
	return in.Node + "/" + strconv.Itoa(in.PID) + "/" + in.Name
}

// Has says whether the instance has a channel of role r.
func (in *Instance) Has(r Role) bool { return in.Chans[r] >= 0 }

// Operator is every instance of one OPERATOR name, on any node.
type Operator struct {
	Name      string
	Instances []int // indices into Plan.Instances
}

// chanInfo is what the per-tuple loop looks up for a channel.
type chanInfo struct {
	inst int32 // -1: not a mark of a tuple channel
	op   int32
	role Role
}

// Plan maps the analysis's channels to operator instances and roles.
type Plan struct {
	Instances []Instance
	Operators []Operator
	// Ignored says which channels' names follow the rule but cannot take
	// part (a counter channel named "x in", a PERIODICCOUNTER named
	// "x count", a tuple channel named "x lineage"), and which
	// CP_SERVICERATE and CP_LINEAGE channels do not follow it.
	Ignored []string
	ch      []chanInfo
	marked  int // tuple channels that mark
}

// Marked says whether any channel marks an operator instance: without one
// there is no capacity analysis.
func (p *Plan) Marked() bool { return len(p.Instances) > 0 }

// TupleMarks says whether any tuple channel marks (in, out or sent): only
// then are tuples worth feeding to an Acc.
func (p *Plan) TupleMarks() bool { return p.marked > 0 }

// Role is channel ch's role and instance (-1 and RoleNone for a channel
// that marks nothing).
func (p *Plan) Role(ch int) (inst int, r Role) {
	c := p.ch[ch]
	return int(c.inst), c.role
}

// noChans is an instance's Chans before its channels are found.
var noChans = func() (c [numRoles]int) {
	for i := range c {
		c[i] = -1
	}
	return c
}()

type instKey struct {
	node     string
	pid      int
	op, name string
}

// NewPlan reads the naming rule of every channel. Two channels that mark
// the same (node, pid, operator, instance, role) are an error naming both.
func NewPlan(chans []Channel) (*Plan, error) {
	p := &Plan{ch: make([]chanInfo, len(chans))}
	type found struct {
		ch   int
		mark Mark
	}
	var marks []found
	for i, c := range chans {
		p.ch[i] = chanInfo{inst: -1, op: -1}
		m, ok := ParseName(c.Name)
		switch {
		case c.Internal:
		case !ok && c.ServiceRate:
			p.Ignored = append(p.Ignored, fmt.Sprintf("%s/%s (%s): a CP_SERVICERATE channel whose name does not follow the naming rule \"OPERATOR[#INSTANCE] count\": its estimates are left out", c.Node, c.Name, c.Path))
		case !ok && c.Lineage:
			p.Ignored = append(p.Ignored, fmt.Sprintf("%s/%s (%s): a CP_LINEAGE channel whose name does not follow the naming rule \"OPERATOR[#INSTANCE] lineage\": not an operator's (its lineage is still followed)", c.Node, c.Name, c.Path))
		case !ok:
		case m.Role == RoleCount && !c.ServiceRate:
			p.Ignored = append(p.Ignored, fmt.Sprintf("%s/%s (%s): role count needs a CP_SERVICERATE channel: left out", c.Node, c.Name, c.Path))
		case m.Role == RoleLineage && !c.Lineage:
			p.Ignored = append(p.Ignored, fmt.Sprintf("%s/%s (%s): role lineage needs a CP_LINEAGE channel (CP_LogLineage's pairs): left out", c.Node, c.Name, c.Path))
		case m.Role != RoleLineage && c.Lineage:
			p.Ignored = append(p.Ignored, fmt.Sprintf("%s/%s (%s): a CP_LINEAGE channel takes role lineage, not %s: left out as a mark (its lineage is still followed)", c.Node, c.Name, c.Path, m.Role))
		case m.Role != RoleCount && m.Role != RoleLineage && !c.Tuples:
			p.Ignored = append(p.Ignored, fmt.Sprintf("%s/%s (%s): role %s needs a tuple channel (records of tuple ids): left out", c.Node, c.Name, c.Path, m.Role))
		default:
			marks = append(marks, found{i, m})
		}
	}
	// Instances in a stable order: operator, node, pid, instance.
	sort.SliceStable(marks, func(x, y int) bool {
		a, b := &marks[x], &marks[y]
		ca, cb := &chans[a.ch], &chans[b.ch]
		switch {
		case a.mark.Operator != b.mark.Operator:
			return a.mark.Operator < b.mark.Operator
		case ca.Node != cb.Node:
			return ca.Node < cb.Node
		case ca.PID != cb.PID:
			return ca.PID < cb.PID
		}
		return a.mark.Instance < b.mark.Instance
	})
	insts := map[instKey]int{}
	ops := map[string]int{}
	for _, f := range marks {
		c := &chans[f.ch]
		k := instKey{c.Node, c.PID, f.mark.Operator, f.mark.Instance}
		ii, ok := insts[k]
		if !ok {
			oi, ok := ops[f.mark.Operator]
			if !ok {
				oi = len(p.Operators)
				ops[f.mark.Operator] = oi
				p.Operators = append(p.Operators, Operator{Name: f.mark.Operator})
			}
			ii = len(p.Instances)
			insts[k] = ii
			p.Instances = append(p.Instances, Instance{Node: c.Node, PID: c.PID, Operator: f.mark.Operator,
				Name: f.mark.Instance, Op: oi, Chans: noChans})
			p.Operators[oi].Instances = append(p.Operators[oi].Instances, ii)
		}
		in := &p.Instances[ii]
		if prev := in.Chans[f.mark.Role]; prev >= 0 {
			o := &chans[prev]
			return nil, fmt.Errorf("capacity: channels %q (%s) and %q (%s) both mark the %q of operator %q, instance %q, in process %d on node %s: "+
				"one channel per instance and role; give each instance its own #INSTANCE in its channels' names (e.g. \"%s#1 %s\" and \"%s#2 %s\"), "+
				"or skip the capacity analysis with --no-capacity",
				o.Name, o.Path, c.Name, c.Path, f.mark.Role.String(), f.mark.Operator, f.mark.Instance, c.PID, c.Node,
				f.mark.Operator, f.mark.Role, f.mark.Operator, f.mark.Role)
		}
		in.Chans[f.mark.Role] = f.ch
		if f.mark.Role != RoleCount && f.mark.Role != RoleLineage {
			p.ch[f.ch] = chanInfo{inst: int32(ii), op: int32(in.Op), role: f.mark.Role}
			p.marked++
		}
	}
	return p, nil
}
