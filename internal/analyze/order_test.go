package analyze

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Channels: 0 "src out" on node a; 1 "map in" and 2 "map out" in one process
// on node b; 3 "sink in" on node c.
func orderFixture(order ...string) *analysis {
	a := &analysis{cfg: Config{Order: order}, chans: []*Channel{
		{Node: "a", PID: 1, Name: "src out"}, {Node: "b", PID: 2, Name: "map in"},
		{Node: "b", PID: 2, Name: "map out"}, {Node: "c", PID: 3, Name: "sink in"}}}
	a.indexChannels()
	return a
}

func labels(a *analysis, rank []int) []string {
	out := make([]string, len(rank))
	for i, r := range rank {
		out[r] = a.chans[i].Label()
	}
	return out
}

func TestOrderFromCertainAndLikelyVotes(t *testing.T) {
	a := orderFixture()
	ov := orderVotes{}
	// 100 tuples. The estimates of node a are biased late: "src out" seems
	// to come after "map in" (uncertain: the bounds overlap) in 80 of them.
	// Within node b's process the TSC orders for certain, even against the
	// estimates; "sink in" is far later than everything, for certain.
	for i := 0; i < 100; i++ {
		srcEst := 10.0
		if i < 80 {
			srcEst = 12
		}
		evs := []event{
			{ch: 1, tsc: 100, est: 11, err: 5},
			{ch: 2, tsc: 90 + 20, est: 10.5, err: 5}, // est says before map in; its TSC says after
			{ch: 0, est: srcEst, err: 5},
			{ch: 3, est: 100, err: 5},
		}
		// vote wants them by estimate, as the join sorts them.
		sortByEst(evs)
		a.vote(ov, evs)
	}
	require.Equal(t, [2]uint64{100, 0}, ov[[2]uint32{1, 2}].sure, "same process: by TSC")
	require.Equal(t, [2]uint64{100, 0}, ov[[2]uint32{0, 3}].sure)
	require.Equal(t, [2]uint64{20, 80}, ov[[2]uint32{0, 1}].likely)
	rank, err := a.rankChannels(ov)
	require.NoError(t, err)
	// The majority of the estimates is wrong about src against map in and
	// map out; the ranking follows it (nothing in the data says otherwise).
	require.Equal(t, []string{"b/map in", "b/map out", "a/src out", "c/sink in"}, labels(a, rank))

	// The user knows the topology: --order wins, by label or by name.
	a = orderFixture("a/src out", "map in")
	rank, err = a.rankChannels(ov)
	require.NoError(t, err)
	require.Equal(t, []string{"a/src out", "b/map in", "b/map out", "c/sink in"}, labels(a, rank))

	// A partial order is a hard relation between the channels it names;
	// the rest keeps what the data is sure of (here: the sink last, map in
	// before map out unless the user says otherwise).
	a = orderFixture("map out", "map in")
	rank, err = a.rankChannels(ov)
	require.NoError(t, err)
	require.Equal(t, []string{"b/map out", "b/map in", "a/src out", "c/sink in"}, labels(a, rank))
	// Saying only what the data already knows changes nothing.
	a = orderFixture("a/src out", "c/sink in")
	rank, err = a.rankChannels(ov)
	require.NoError(t, err)
	require.Equal(t, []string{"b/map in", "b/map out", "a/src out", "c/sink in"}, labels(a, rank))
	a = orderFixture("a/src out", "b/map in", "b/map out")
	rank, err = a.rankChannels(ov)
	require.NoError(t, err)
	require.Equal(t, []string{"a/src out", "b/map in", "b/map out", "c/sink in"}, labels(a, rank))

	_, err = orderFixture("nope").rankChannels(ov)
	require.ErrorContains(t, err, `--order: no channel "nope"`)
}

func TestOrderCertainBeatsLikely(t *testing.T) {
	a := orderFixture()
	ov := orderVotes{}
	for i := 0; i < 10; i++ { // 10 tuples say src after map in, uncertainly
		a.vote(ov, []event{{ch: 1, est: 10, err: 5}, {ch: 0, est: 11, err: 5}})
	}
	a.vote(ov, []event{{ch: 0, est: 0, err: 1}, {ch: 1, est: 10, err: 1}}) // one is sure of the opposite
	rank, err := a.rankChannels(ov)
	require.NoError(t, err)
	require.Less(t, rank[0], rank[1])
}

func sortByEst(evs []event) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].est < evs[j-1].est; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}
