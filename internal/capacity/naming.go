// Package capacity measures each operator's service rate, busy share and
// headroom from the marks a program logs at its operators' entry and exit,
// and from them the topology's bottleneck and the highest source rate it
// sustains (docs/capacity.md).
//
// A channel marks an operator instance when its name follows the naming
// rule (ParseName): "OPERATOR ROLE" or "OPERATOR#INSTANCE ROLE", ROLE one
// of in, out, sent, count, lineage. The instance is (node, pid, OPERATOR,
// INSTANCE).
// A tuple's own service time at an instance is its out minus its in (one
// process, one counter: exact); out to sent is time blocked handing it
// downstream. The analysis (package analyze) joins every tuple's records
// across channels and feeds each tuple to an Acc, one per worker, with its
// records in hop order; the workers' Accs are merged at the end and Rows
// turns them into the result table (capacity.parquet, capacity.csv).
// Operators instrumented with counters only (CP_SERVICERATE, role count)
// give the Beard & Chamberlain estimates their files hold (ReadCount).
// A lineage channel (CP_LINEAGE, role lineage) says which input each of
// the instance's outputs was made from; the analysis follows it when it
// joins records (package analyze), it is never a mark of a tuple.
package capacity

import (
	"strings"
)

// Role is what a marked channel records of its operator instance.
type Role uint8

const (
	RoleNone    Role = iota // not a mark
	RoleIn                  // the instance took the tuple from its input and starts working on it
	RoleOut                 // its own work on the tuple is done; about to hand it downstream
	RoleSent                // the hand-off returned (out to sent: blocked by backpressure)
	RoleCount               // a CP_SERVICERATE counter channel (items taken, converged estimates)
	RoleLineage             // a CP_LINEAGE channel: which input each output was made from
	numRoles
)

var roleNames = [...]string{"", "in", "out", "sent", "count", "lineage"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "?"
}

// Mark is what a channel's name says of the operator instance it marks.
type Mark struct {
	Operator string // trimmed; may hold spaces and dashes
	Instance string // what follows the operator's last '#' ("" without one)
	Role     Role
}

// ParseName reads the naming rule: ROLE is the name's last space-separated
// word, one of in, out, sent, count, lineage (lower case); OPERATOR is the rest,
// trimmed, up to its last '#', and INSTANCE what follows that '#', trimmed.
// A name whose role is another word, or whose operator is empty, marks
// nothing (ok false).
func ParseName(name string) (m Mark, ok bool) {
	name = strings.TrimSpace(name)
	sp := strings.LastIndexAny(name, " \t")
	if sp < 0 {
		return Mark{}, false
	}
	switch name[sp+1:] {
	case "in":
		m.Role = RoleIn
	case "out":
		m.Role = RoleOut
	case "sent":
		m.Role = RoleSent
	case "count":
		m.Role = RoleCount
	case "lineage":
		m.Role = RoleLineage
	default:
		return Mark{}, false
	}
	rest := strings.TrimSpace(name[:sp])
	if h := strings.LastIndexByte(rest, '#'); h >= 0 {
		m.Instance = strings.TrimSpace(rest[h+1:])
		rest = strings.TrimSpace(rest[:h])
	}
	if rest == "" {
		return Mark{}, false
	}
	m.Operator = rest
	return m, true
}
