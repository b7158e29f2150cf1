package lru

import (
	"fmt"
	"sync"
	"testing"
)

func TestCache_KeepsTheMostRecentlyUsed(t *testing.T) {
	c := New[string, int](2)
	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 { // a is now the most recent
		t.Fatalf("Get(a) = %d, %v", v, ok)
	}
	c.Put("c", 3) // drops b
	if _, ok := c.Get("b"); ok {
		t.Error("b should have been dropped")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.Get(k); !ok || v != want {
			t.Errorf("Get(%s) = %d, %v; want %d", k, v, ok, want)
		}
	}
	c.Put("a", 10)
	if v, _ := c.Get("a"); v != 10 || c.Len() != 2 {
		t.Errorf("replace: a=%d len=%d", v, c.Len())
	}
	c.Delete("a")
	if _, ok := c.Get("a"); ok || c.Len() != 1 {
		t.Errorf("after Delete: len %d", c.Len())
	}
}

func TestCache_ConcurrentUseStaysWithinCapacity(t *testing.T) {
	c := New[string, int](100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				k := fmt.Sprint(g, "-", i)
				c.Put(k, i)
				c.Get(k)
			}
		}()
	}
	wg.Wait()
	if c.Len() != 100 {
		t.Errorf("len %d, want 100", c.Len())
	}
}
