// Package safezip reads ZIP archives that may be hostile. It refuses, before
// reading any entry, an archive that is not a ZIP, has too many entries, or
// declares too much uncompressed data; and it reports for each entry what
// makes it unsafe to read (an unsafe name, a nested archive, an extreme
// compression ratio, encryption, a size over the limit) instead of reading
// it. Reading an entry never produces more than the limit, whatever its
// headers claim.
package safezip

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"
)

// Limits bound what an archive may hold.
type Limits struct {
	MaxEntries           int   // entries in the central directory
	MaxDirectoryBytes    int64 // bytes of the central directory's headers
	MaxTotalUncompressed int64 // sum of the declared uncompressed sizes
	MaxEntrySize         int64 // uncompressed bytes of one entry
	MaxRatio             int64 // uncompressed / compressed of one entry (beyond 64 KiB)
}

// DefaultLimits suit an archive of certificates.
var DefaultLimits = Limits{
	MaxEntries:           10000,
	MaxDirectoryBytes:    16 << 20,
	MaxTotalUncompressed: 256 << 20,
	MaxEntrySize:         256 << 10,
	MaxRatio:             100,
}

// Error is a refusal of the whole archive.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

// Entry is one file of the archive (directories and operating-system
// metadata such as __MACOSX/ and .DS_Store are left out). Problem, when
// set, says why the entry must not be read.
type Entry struct {
	Index   int // position among the entries, from 0
	Name    string
	Size    int64 // declared uncompressed size
	Problem string
	file    *zip.File
}

// Archive is an opened, checked archive.
type Archive struct {
	Entries []Entry
	limits  Limits
}

// Open checks and opens the archive of size bytes behind r. The central
// directory is walked first, header by header up to the limits, before
// archive/zip parses it (and allocates for every header it finds).
func Open(r io.ReaderAt, size int64, lim Limits) (*Archive, error) {
	if _, err := countEntries(r, size, lim.MaxEntries, lim.MaxDirectoryBytes); err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, &Error{"the file is not a readable ZIP archive"}
	}
	if len(zr.File) > lim.MaxEntries {
		return nil, &Error{fmt.Sprintf("the archive holds %d entries; at most %d are accepted", len(zr.File), lim.MaxEntries)}
	}
	a := &Archive{limits: lim}
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		if total > uint64(lim.MaxTotalUncompressed) { //nolint:gosec // the limits are the callers' positive constants
			return nil, &Error{fmt.Sprintf("the archive unpacks to more than %d bytes", lim.MaxTotalUncompressed)}
		}
		if skip(f) {
			continue
		}
		e := Entry{Index: len(a.Entries), Name: f.Name, Size: int64(min(f.UncompressedSize64, 1<<62)), file: f}
		e.Problem = problem(f, lim)
		a.Entries = append(a.Entries, e)
	}
	return a, nil
}

// skip tells the entries that are not files of their own: directories and
// the metadata archivers add.
func skip(f *zip.File) bool {
	name := strings.ReplaceAll(f.Name, "\\", "/")
	base := path.Base(name)
	return strings.HasSuffix(name, "/") || f.FileInfo().IsDir() ||
		strings.HasPrefix(name, "__MACOSX/") || base == ".DS_Store" || base == "Thumbs.db"
}

// nestedArchives are extensions of archives and compressed files.
var nestedArchives = []string{".zip", ".jar", ".war", ".ear", ".apk", ".7z", ".rar", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".tar", ".cab", ".iso", ".lz", ".lzma", ".z"}

// problem says why an entry must not be read, or "".
func problem(f *zip.File, lim Limits) string {
	if msg := UnsafeName(f.Name); msg != "" {
		return msg
	}
	lower := strings.ToLower(f.Name)
	for _, ext := range nestedArchives {
		if strings.HasSuffix(lower, ext) {
			return "nested archives are not read"
		}
	}
	if f.Flags&0x1 != 0 {
		return "encrypted entries are not read"
	}
	if f.Method != zip.Store && f.Method != zip.Deflate {
		return "the entry's compression method is not supported"
	}
	if f.UncompressedSize64 > uint64(lim.MaxEntrySize) { //nolint:gosec // the limits are the callers' positive constants
		return fmt.Sprintf("the file is larger than %d bytes", lim.MaxEntrySize)
	}
	if f.UncompressedSize64 > 64<<10 && (f.CompressedSize64 == 0 || f.UncompressedSize64/max(f.CompressedSize64, 1) > uint64(lim.MaxRatio)) { //nolint:gosec // the limits are the callers' positive constants
		return "the file's compression ratio is suspiciously high"
	}
	return ""
}

// UnsafeName says why an entry name is unsafe to use as a path, or "":
// absolute paths, drive letters, parent references, control characters,
// invalid UTF-8.
func UnsafeName(name string) string {
	n := strings.ReplaceAll(name, "\\", "/")
	switch {
	case name == "":
		return "the entry has no name"
	case !utf8.ValidString(name):
		return "the entry name is not valid UTF-8"
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "the entry name holds control characters"
	case strings.HasPrefix(n, "/") || (len(n) >= 2 && n[1] == ':'):
		return "the entry name is an absolute path"
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "the entry name climbs out of the archive (path traversal)"
		}
	}
	return ""
}

// Read returns the bytes of an entry without a Problem. It never reads
// more than the limit: an entry that unpacks to more than it declared, or
// to more than MaxEntrySize, is an error, as is a content that is itself an
// archive.
func (a *Archive) Read(e Entry) ([]byte, error) {
	if e.Problem != "" {
		return nil, errors.New(e.Problem)
	}
	rc, err := e.file.Open()
	if err != nil {
		return nil, errors.New("the entry cannot be read")
	}
	defer func() { _ = rc.Close() }() // only read: a failed close loses nothing
	//nolint:gosec // entries larger than MaxEntrySize (an int64) were refused by check
	limit := min(int64(e.file.UncompressedSize64), a.limits.MaxEntrySize)
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if int64(len(data)) > limit {
		return nil, errors.New("the entry unpacks to more than it declares")
	}
	if err != nil {
		return nil, errors.New("the entry is damaged (bad data or checksum)")
	}
	if isArchive(data) {
		return nil, errors.New("nested archives are not read")
	}
	return data, nil
}

// isArchive recognizes the magic numbers of common archives.
func isArchive(b []byte) bool {
	for _, magic := range [][]byte{{'P', 'K', 3, 4}, {'P', 'K', 5, 6}, {0x1f, 0x8b}, {'7', 'z', 0xbc, 0xaf}, []byte("Rar!"), {'B', 'Z', 'h'}, {0xfd, '7', 'z', 'X', 'Z'}} {
		if bytes.HasPrefix(b, magic) {
			return true
		}
	}
	return false
}

// zipEnd is what the end of an archive says of its central directory: where
// its end record lies, the directory's declared size and offset.
type zipEnd struct {
	endOffset int64 // of the end record (the ZIP64 one when there is one)
	dirSize   uint64
	dirOffset uint64
}

// readEnd finds the end-of-central-directory record as archive/zip does
// (the last signature in the last 1 KiB, else 65 KiB, whose comment fits),
// following the ZIP64 locator when a field says to.
func readEnd(r io.ReaderAt, size int64) (*zipEnd, error) {
	notZip := &Error{"the file is not a readable ZIP archive"}
	const eocdLen = 22
	var buf []byte
	var at int64 = -1
	for i, bLen := range []int64{1024, 65 * 1024} {
		bLen = min(bLen, size)
		buf = make([]byte, bLen)
		if _, err := r.ReadAt(buf, size-bLen); err != nil && !errors.Is(err, io.EOF) {
			return nil, notZip
		}
		for p := len(buf) - eocdLen; p >= 0; p-- {
			if bytes.HasPrefix(buf[p:], []byte("PK\x05\x06")) {
				n := int(binary.LittleEndian.Uint16(buf[p+eocdLen-2:]))
				if n+eocdLen+p <= len(buf) {
					buf, at = buf[p:], size-bLen+int64(p)
					break
				}
			}
		}
		if at >= 0 {
			break
		}
		if i == 1 || bLen == size {
			return nil, notZip
		}
	}
	end := &zipEnd{
		endOffset: at,
		dirSize:   uint64(binary.LittleEndian.Uint32(buf[12:])),
		dirOffset: uint64(binary.LittleEndian.Uint32(buf[16:])),
	}
	records := binary.LittleEndian.Uint16(buf[10:])
	if records != 0xffff && end.dirSize != 0xffff && end.dirOffset != 0xffffffff {
		return end, nil
	}
	// ZIP64: the locator sits just before the record and points at the
	// ZIP64 end-of-central-directory record.
	if at < 20 {
		return end, nil
	}
	loc := make([]byte, 20)
	if _, err := r.ReadAt(loc, at-20); err != nil || !bytes.HasPrefix(loc, []byte("PK\x06\x07")) {
		return end, nil
	}
	off := binary.LittleEndian.Uint64(loc[8:])
	if off > uint64(size) || int64(off)+56 > size { //nolint:gosec // size is a file size: not negative
		return nil, notZip
	}
	rec := make([]byte, 56)
	if _, err := r.ReadAt(rec, int64(off)); err != nil || !bytes.HasPrefix(rec, []byte("PK\x06\x06")) { //nolint:gosec // off <= size, an int64, checked above
		return nil, notZip
	}
	end.endOffset = int64(off) //nolint:gosec // off <= size, an int64, checked above
	end.dirSize = binary.LittleEndian.Uint64(rec[40:])
	end.dirOffset = binary.LittleEndian.Uint64(rec[48:])
	return end, nil
}

// countEntries counts the central-directory headers archive/zip would parse,
// reading them one by one and stopping after limit+1: archive/zip reads
// headers from the directory's start until one does not parse, whatever
// count the end record declares, so a count read from the end record alone
// can lie. Both places archive/zip may take as the directory's start are
// walked. The headers' bytes are bounded by maxBytes.
func countEntries(r io.ReaderAt, size int64, limit int, maxBytes int64) (int, error) {
	notZip := &Error{"the file is not a readable ZIP archive"}
	end, err := readEnd(r, size)
	if err != nil {
		return 0, err
	}
	const maxInt64 = 1<<63 - 1
	if end.dirSize > maxInt64 || end.dirOffset > maxInt64 {
		return 0, notZip
	}
	base := end.endOffset - int64(end.dirSize) - int64(end.dirOffset)
	starts := []int64{int64(end.dirOffset)}
	if base != 0 {
		starts = append(starts, base+int64(end.dirOffset))
	}
	most := 0
	for _, start := range starts {
		if start < 0 || start >= size {
			continue
		}
		n, err := walkDirectory(r, start, size, limit, maxBytes)
		if err != nil {
			return 0, err
		}
		most = max(most, n)
	}
	return most, nil
}

// walkDirectory counts the central-directory headers from start on.
func walkDirectory(r io.ReaderAt, start, size int64, limit int, maxBytes int64) (int, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, start, size-start), 64<<10)
	head := make([]byte, 46)
	var read int64
	for n := 0; ; n++ {
		if _, err := io.ReadFull(br, head); err != nil || binary.LittleEndian.Uint32(head) != 0x02014b50 {
			return n, nil
		}
		if n >= limit {
			return 0, &Error{fmt.Sprintf("the archive holds more than %d entries; at most %d are accepted", limit, limit)}
		}
		rest := int64(binary.LittleEndian.Uint16(head[28:])) + int64(binary.LittleEndian.Uint16(head[30:])) + int64(binary.LittleEndian.Uint16(head[32:]))
		if read += 46 + rest; read > maxBytes {
			return 0, &Error{fmt.Sprintf("the archive's directory is larger than %d bytes", maxBytes)}
		}
		if _, err := br.Discard(int(rest)); err != nil {
			return n + 1, nil
		}
	}
}
