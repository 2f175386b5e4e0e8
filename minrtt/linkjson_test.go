package minrtt

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// A report's links marshal even with what was not measured (B never probed
// A: min_rtt_rev is NaN), and read back.
func TestLinkJSON(t *testing.T) {
	m, err := NewModel(handRounds(), Options{Ref: "A"})
	require.NoError(t, err)
	links := m.Links()
	b, err := json.Marshal(links)
	require.NoError(t, err)
	require.Contains(t, string(b), `"into":"A","from":"B"`)
	require.Contains(t, string(b), `"min_rtt_rev":null`)
	var back []Link
	require.NoError(t, json.Unmarshal(b, &back))
	require.Len(t, back, len(links))
	for i := range links {
		require.Equal(t, links[i].Into, back[i].Into)
		require.Equal(t, links[i].AnchorErr, back[i].AnchorErr)
		same := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
		require.True(t, same(links[i].MinRTTRev, back[i].MinRTTRev))
		require.True(t, same(links[i].Ratio, back[i].Ratio))
		require.True(t, same(links[i].RatioHi, back[i].RatioHi))
		require.Equal(t, links[i].Used, back[i].Used)
	}
}
