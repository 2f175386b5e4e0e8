package marking

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseName(t *testing.T) {
	for _, c := range []struct {
		name string
		want Mark
		ok   bool
	}{
		{"relay in", Mark{"relay", "", RoleIn}, true},
		{"relay out", Mark{"relay", "", RoleOut}, true},
		{"map#3 sent", Mark{"map", "3", RoleSent}, true},
		{"word count#worker-1 count", Mark{"word count", "worker-1", RoleCount}, true},
		{"  flat-map #2  in ", Mark{"flat-map", "2", RoleIn}, true},
		{"a#b#c out", Mark{"a#b", "c", RoleOut}, true},
		{"map# in", Mark{"map", "", RoleIn}, true},
		{"b work", Mark{}, false},
		{"in", Mark{}, false},
		{"#3 in", Mark{}, false},
		{"map IN", Mark{}, false},
		{"map input", Mark{}, false},
		{"win#2 lineage", Mark{"win", "2", RoleLineage}, true},
		{"win LINEAGE", Mark{}, false},
		{"", Mark{}, false},
	} {
		m, ok := ParseName(c.name)
		require.Equal(t, c.ok, ok, c.name)
		require.Equal(t, c.want, m, c.name)
	}
}
