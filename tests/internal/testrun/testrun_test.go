package testrun

import (
	"testing"
	"time"
)

// Retry stops at the first attempt without problems, pausing after each
// failed one for RetryPause times its number.
func TestRetryPausesBetweenAttempts(t *testing.T) {
	defer func(p time.Duration) { RetryPause = p }(RetryPause)
	RetryPause = 20 * time.Millisecond
	var at []time.Time
	start := time.Now()
	Retry(t, 5, func(try int) []string {
		at = append(at, time.Now())
		if try < 3 {
			return []string{"not yet"}
		}
		return nil
	})
	if len(at) != 3 {
		t.Fatalf("%d attempts, want 3 (the third found nothing wrong)", len(at))
	}
	// Pauses of 20 ms and 40 ms: at least 60 ms before the third attempt.
	if d := at[2].Sub(start); d < 60*time.Millisecond {
		t.Errorf("third attempt %v after the first, want at least 60 ms of pauses", d)
	}
}
