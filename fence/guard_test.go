package fence

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestGuardAcceptsRisingRefusesLower(t *testing.T) {
	var g Guard
	for _, tok := range []uint64{1, 1, 5, 5, 9} {
		if err := g.Accept(tok); err != nil {
			t.Fatalf("Accept(%d): %v", tok, err)
		}
	}
	err := g.Accept(8)
	var se *StaleError
	if !errors.As(err, &se) || !errors.Is(err, ErrStale) {
		t.Fatalf("Accept(8) after 9 = %v, want *StaleError matching ErrStale", err)
	}
	if se.Token != 8 || se.Highest != 9 {
		t.Fatalf("StaleError = %+v, want {8 9}", se)
	}
	if g.Highest() != 9 {
		t.Fatalf("Highest = %d, want 9", g.Highest())
	}
}

func TestGuardDoSkipsStale(t *testing.T) {
	var g Guard
	ran := 0
	if err := g.Do(3, func() error { ran++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := g.Do(2, func() error { ran++; return nil }); !errors.Is(err, ErrStale) {
		t.Fatalf("Do(2) = %v, want ErrStale", err)
	}
	want := errors.New("boom")
	if err := g.Do(3, func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("Do error = %v, want %v", err, want)
	}
	if ran != 1 {
		t.Fatalf("fn ran %d times, want 1", ran)
	}
}

func TestGuardDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guard")
	g, err := OpenGuard(path)
	if err != nil {
		t.Fatal(err)
	}
	if g.Highest() != 0 {
		t.Fatalf("fresh guard at %d", g.Highest())
	}
	if err := g.Accept(42); err != nil {
		t.Fatal(err)
	}
	g2, err := OpenGuard(path)
	if err != nil {
		t.Fatal(err)
	}
	if g2.Highest() != 42 {
		t.Fatalf("reopened guard at %d, want 42", g2.Highest())
	}
	if err := g2.Accept(41); !errors.Is(err, ErrStale) {
		t.Fatalf("Accept(41) after reopen = %v, want ErrStale", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d files, want only the guard file", len(entries))
	}
}

func TestGuardCorruptFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "guard")
	b := encodeGuard(7)
	b[6] ^= 1
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenGuard(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenGuard(corrupt) = %v, want ErrCorrupt", err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenGuard(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenGuard(short) = %v, want ErrCorrupt", err)
	}
}

// TestGuardConcurrent races leaders with different tokens: whatever the
// order, no fn with a token below one already accepted may run.
func TestGuardConcurrent(t *testing.T) {
	var g Guard
	var mu sync.Mutex
	var order []uint64
	var wg sync.WaitGroup
	for tok := uint64(1); tok <= 50; tok++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = g.Do(tok, func() error {
				mu.Lock()
				order = append(order, tok)
				mu.Unlock()
				return nil
			})
		}()
	}
	wg.Wait()
	for i := 1; i < len(order); i++ {
		if order[i] < order[i-1] {
			t.Fatalf("token %d ran after %d: %v", order[i], order[i-1], order)
		}
	}
}
