package activities

import "time"

// SetChunkSteps sets the hook that receives the time of each step of a chunk.
func SetChunkSteps(f func(step string, d time.Duration)) { chunkSteps = f }
