// Package marking is the naming rule by which a channel marks an operator
// instance (docs/capacity.md, "Marking an operator"): "OPERATOR ROLE" or
// "OPERATOR#INSTANCE ROLE", ROLE one of in, out, sent, count, lineage. The
// library reads it when a channel opens (a marked channel notes its
// thread's waits, libcp/marks.c); the analysis reads it to find operators
// (package capacity).
package marking

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
	NumRoles
)

var roleNames = [...]string{"", "in", "out", "sent", "count", "lineage"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "?"
}

// Tuple says whether the role marks tuples as they pass (in, out, sent):
// the roles whose records tell an instance's visits apart.
func (r Role) Tuple() bool { return r == RoleIn || r == RoleOut || r == RoleSent }

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
