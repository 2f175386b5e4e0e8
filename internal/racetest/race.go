//go:build race

package racetest

// Enabled: built with -race.
const Enabled = true
