package activities

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLookahead(t *testing.T) {
	ctx := context.Background()
	var l lookahead
	if c, err := l.take(ctx, aheadKey{1, 1, 0}); c != nil || err != nil {
		t.Fatalf("nothing prepared: %v, %v", c, err)
	}
	release := make(chan struct{})
	calls := 0
	key := aheadKey{job: 1, row: 101, offset: 4000}
	for range 2 { // a second start for the same chunk is a no-op
		l.start(key, func(context.Context) (*csvChunk, error) {
			calls++
			<-release
			return &csvChunk{end: 8000}, nil
		})
	}
	go func() { time.Sleep(10 * time.Millisecond); close(release) }()
	c, err := l.take(ctx, key) // waits for it
	if err != nil || c == nil || c.end != 8000 || calls != 1 {
		t.Fatalf("take = %+v, %v after %d preparations", c, err, calls)
	}
	if c, _ := l.take(ctx, key); c != nil {
		t.Error("a chunk was taken twice")
	}
	if c, _ := l.take(ctx, aheadKey{job: 1, row: 101, offset: 4001}); c != nil {
		t.Error("a chunk was taken at another offset")
	}

	boom := errors.New("boom")
	l.start(key, func(context.Context) (*csvChunk, error) { return nil, boom })
	if _, err := l.take(ctx, key); !errors.Is(err, boom) {
		t.Errorf("a failed preparation: %v", err)
	}

	stuck := aheadKey{job: 2, row: 1}
	l.start(stuck, func(ctx context.Context) (*csvChunk, error) { <-ctx.Done(); return nil, ctx.Err() })
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.take(cancelled, stuck); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting with a cancelled context: %v", err)
	}
}
