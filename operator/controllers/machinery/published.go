package machinery

import "sync/atomic"

// Published is a value one controller learns and others read (the share types the Manila
// controller last heard of, say). The publisher replaces it whole; a reader gets the snapshot
// published last, which nobody changes after publishing it. No reader takes the publisher's
// lock or looks into its struct.
type Published[T any] struct{ p atomic.Pointer[T] }

// Publish makes v the current value. v must not be changed afterwards.
func (p *Published[T]) Publish(v *T) { p.p.Store(v) }

// Load returns the current value, nil before the first Publish.
func (p *Published[T]) Load() *T { return p.p.Load() }
