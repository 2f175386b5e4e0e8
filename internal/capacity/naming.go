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

import "cloudprofiler/internal/marking"

// The naming rule is package marking's; these names keep the analysis's
// code as it was written.
type (
	Role = marking.Role
	Mark = marking.Mark
)

const (
	RoleNone    = marking.RoleNone
	RoleIn      = marking.RoleIn
	RoleOut     = marking.RoleOut
	RoleSent    = marking.RoleSent
	RoleCount   = marking.RoleCount
	RoleLineage = marking.RoleLineage
	numRoles    = marking.NumRoles
)

// ParseName reads the naming rule (marking.ParseName).
func ParseName(name string) (Mark, bool) { return marking.ParseName(name) }
