package api

// JobEventsPolling reports whether the process polls jobs for event
// streams (only while one is open).
func (s *Server) JobEventsPolling() bool {
	s.jobWatch.mu.Lock()
	defer s.jobWatch.mu.Unlock()
	return s.jobWatch.running
}

// JobEventStreams counts the event streams the process serves.
func (s *Server) JobEventStreams() int { return s.jobWatch.streams() }
