// Package ziptest builds hostile ZIP archives for tests.
package ziptest

import (
	"bytes"
	"encoding/binary"
)

// LyingArchive is a central directory of n headers (no file data is
// needed to make archive/zip parse them) whose end record declares only
// n mod 65536 entries, as a 16-bit count does, optionally through a ZIP64
// end record declaring the same.
func LyingArchive(n int, zip64 bool) []byte {
	var b bytes.Buffer
	head := make([]byte, 46)
	binary.LittleEndian.PutUint32(head, 0x02014b50)
	binary.LittleEndian.PutUint16(head[4:], 20)
	binary.LittleEndian.PutUint16(head[6:], 20)
	binary.LittleEndian.PutUint16(head[28:], 5) // name length
	for i := 0; i < n; i++ {
		b.Write(head)
		b.WriteString("a.cer")
	}
	dirSize := b.Len()
	declared := uint16(n) //nolint:gosec // G115: dropping all but 16 bits is the lie the archive tells
	if zip64 {
		rec := make([]byte, 56)
		binary.LittleEndian.PutUint32(rec, 0x06064b50)
		binary.LittleEndian.PutUint64(rec[4:], 44)
		binary.LittleEndian.PutUint64(rec[24:], uint64(declared))
		binary.LittleEndian.PutUint64(rec[32:], uint64(declared))
		binary.LittleEndian.PutUint64(rec[40:], uint64(dirSize)) //nolint:gosec // G115: a buffer length, never negative
		binary.LittleEndian.PutUint64(rec[48:], 0)
		recAt := b.Len()
		b.Write(rec)
		loc := make([]byte, 20)
		binary.LittleEndian.PutUint32(loc, 0x07064b50)
		binary.LittleEndian.PutUint64(loc[8:], uint64(recAt)) //nolint:gosec // G115: a buffer length, never negative
		binary.LittleEndian.PutUint32(loc[16:], 1)
		b.Write(loc)
	}
	end := make([]byte, 22)
	binary.LittleEndian.PutUint32(end, 0x06054b50)
	binary.LittleEndian.PutUint16(end[8:], declared)
	binary.LittleEndian.PutUint16(end[10:], declared)
	binary.LittleEndian.PutUint32(end[12:], uint32(dirSize)) //nolint:gosec // G115: a field of 32 bits, as the format has it; with ZIP64 it is overwritten below
	if zip64 {
		binary.LittleEndian.PutUint16(end[8:], 0xffff)
		binary.LittleEndian.PutUint16(end[10:], 0xffff)
		binary.LittleEndian.PutUint32(end[12:], 0xffffffff)
		binary.LittleEndian.PutUint32(end[16:], 0xffffffff)
	}
	b.Write(end)
	return b.Bytes()
}
