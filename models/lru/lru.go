// Package lru is a size-capped, least-recently-used map for the service's
// per-process caches: a cache fed by request data must not grow without
// bound.
package lru

import (
	"container/list"
	"sync"
)

// Cache holds at most its capacity of entries; adding one more drops the
// least recently used. It is safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	cap   int
	order *list.List // front: most recently used
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key   K
	value V
}

// New returns a cache of at most capacity entries (at least 1).
func New[K comparable, V any](capacity int) *Cache[K, V] {
	capacity = max(capacity, 1)
	return &Cache[K, V]{cap: capacity, order: list.New(), items: make(map[K]*list.Element, capacity)}
}

// Get returns the value of key and marks it recently used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry[K, V]).value, true
	}
	var zero V
	return zero, false
}

// Put stores value under key, dropping the least recently used entry when
// the cache is full.
func (c *Cache[K, V]) Put(key K, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*entry[K, V]).value = value
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key: key, value: value})
	for c.order.Len() > c.cap {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*entry[K, V]).key)
	}
}

// Delete forgets key.
func (c *Cache[K, V]) Delete(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.Remove(el)
		delete(c.items, key)
	}
}

// Len returns how many entries the cache holds.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
