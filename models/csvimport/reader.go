package csvimport

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bounds of one record (a row: one line, or several when a quoted field
// holds line breaks). A record over them fails its row alone: the reader
// skips to the end of the line where its quotes close (a quoted field is
// read to its closing quote, as CSV says, however far that is, without
// keeping anything) and goes on with the rows after it. A quote that never
// closes makes the rest of the file that one failed row.
const (
	MaxLineBytes   = 1 << 20 // one line
	MaxRecordBytes = 1 << 20 // all the lines of one record, as in the file
	MaxRecordLines = 10000   // lines of one record
	MaxFields      = 1000    // fields of one record
)

// Errors of one row that breaks the bounds.
var (
	ErrLineTooLong   = fmt.Errorf("a line of the row is longer than %d bytes", MaxLineBytes)
	ErrRecordTooLong = fmt.Errorf("the row is longer than %d bytes or %d lines (a quoted field that does not close?); it was skipped to the line where its quotes close", MaxRecordBytes, MaxRecordLines)
	ErrTooManyFields = fmt.Errorf("the row has more than %d fields", MaxFields)
)

// errOverflow stops the CSV reader in the middle of a record over the bounds.
var errOverflow = errors.New("csvimport: record over the bounds")

// Record is one CSV record: its row number, its fields, and the byte
// offset in the raw file just after it (where the next record starts).
// Err, when set, is what is wrong with this row alone (it does not decode,
// is malformed CSV, or too long); Fields may then be incomplete.
type Record struct {
	Row    int64
	Fields []string
	End    int64
	Err    error
}

// Reader reads records from raw bytes in one encoding, starting at a record
// boundary. Records whose fields are all blank are skipped and not counted.
type Reader struct {
	feed *lineFeed
	csv  *csv.Reader
	base int64 // decoded offset where csv started reading
	row  int64
}

func newCSV(f *lineFeed) *csv.Reader {
	c := csv.NewReader(f)
	c.FieldsPerRecord = -1
	return c
}

// NewReader reads src, whose first byte is at offset of the file and
// starts a record numbered firstRow. At offset 0 a UTF-8 byte order mark
// is skipped.
func NewReader(src io.Reader, enc Encoding, offset, firstRow int64) *Reader {
	f := &lineFeed{
		src: bufio.NewReaderSize(src, 64<<10),
		dec: enc.newDecoder(),
		raw: offset,
		bom: offset == 0,
	}
	return &Reader{feed: f, csv: newCSV(f), row: firstRow - 1}
}

// Read returns the next record, io.EOF after the last, or another error
// when the file cannot be read (the row problems are in Record.Err).
func (r *Reader) Read() (Record, error) {
	for {
		fields, err := r.csv.Read()
		if err != nil && r.feed.err != nil {
			return Record{}, r.feed.err
		}
		if bad := r.feed.overflow; bad != nil {
			// The record is over the bounds: skip it, and read on with a
			// fresh CSV reader from the line after it.
			if err = r.feed.skipRecord(); err != nil {
				return Record{}, err
			}
			r.csv, r.base = newCSV(r.feed), r.feed.dec0
			r.row++
			return Record{Row: r.row, End: r.feed.raw, Err: bad}, nil
		}
		if errors.Is(err, io.EOF) {
			return Record{}, io.EOF
		}
		end, bad := r.feed.consume(r.base + r.csv.InputOffset())
		rec := Record{Fields: fields, End: end, Err: bad}
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe) && rec.Err == nil:
			rec.Err = fmt.Errorf("malformed CSV: %w", pe.Err)
		case err != nil && !errors.As(err, &pe):
			return Record{}, err
		case rec.Err == nil && len(fields) > MaxFields:
			rec.Err = ErrTooManyFields
		}
		if rec.Err == nil && blank(fields) {
			continue
		}
		r.row++
		rec.Row = r.row
		return rec, nil
	}
}

func blank(fields []string) bool {
	for _, f := range fields {
		if strings.TrimSpace(f) != "" {
			return false
		}
	}
	return true
}

// lineMark records where a decoded line ends in the decoded stream and in
// the raw file, and whether it decoded.
type lineMark struct {
	decEnd int64
	rawEnd int64
	err    error
}

// lineFeed hands the CSV reader the file decoded line by line, keeping the
// marks that map decoded offsets back to raw ones.
type lineFeed struct {
	src     *bufio.Reader
	dec     *decoder
	raw     int64 // raw offset of the next unread byte
	dec0    int64 // decoded bytes produced so far
	bom     bool
	pending []byte
	buf     []byte
	marks   []lineMark
	eof     bool
	err     error // a read error of src, fatal

	// The record being read: its raw bytes and lines so far, the quotes in
	// them (odd: inside a quoted field), and why it is over the bounds.
	recBytes int64
	recLines int
	quotes   int64
	overflow error
}

func (f *lineFeed) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		if err := f.next(); err != nil {
			if !errors.Is(err, errOverflow) {
				f.err = err
			}
			return 0, err
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// next reads, decodes and queues one raw line.
func (f *lineFeed) next() error {
	line, rawLen, quotes, tooLong, err := f.readLine()
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read file: %w", err)
	}
	if errors.Is(err, io.EOF) {
		f.eof = true
		if rawLen == 0 {
			return nil
		}
	}
	// An empty line outside quotes is no record's (the CSV reader skips it).
	if empty := string(line) == "\n" || string(line) == "\r\n"; !empty || f.quotes%2 == 1 {
		f.recBytes += rawLen
		f.recLines++
		f.quotes += quotes
	}
	if tooLong || f.recBytes > MaxRecordBytes || f.recLines > MaxRecordLines {
		f.raw += rawLen
		f.overflow = ErrRecordTooLong
		if tooLong && f.recLines == 1 {
			f.overflow = ErrLineTooLong
		}
		return errOverflow
	}
	body := line
	if f.bom {
		f.bom = false
		body = bytes.TrimPrefix(body, []byte("\xEF\xBB\xBF"))
	}
	nl := 0
	if bytes.HasSuffix(body, []byte("\n")) {
		nl = 1
		if bytes.HasSuffix(body, []byte("\r\n")) {
			nl = 2
		}
	}
	text, bad := f.dec.decodeLine(body[:len(body)-nl])
	f.buf = append(append(f.buf[:0], text...), body[len(body)-nl:]...)
	f.pending = f.buf
	f.raw += rawLen
	f.dec0 += int64(len(f.buf))
	f.marks = append(f.marks, lineMark{decEnd: f.dec0, rawEnd: f.raw, err: bad})
	return nil
}

// readLine returns the next raw line with its line feed, or the last
// bytes without one at the end of the file, and the quotes it holds (as
// bytes: '"' is never part of another character in the encodings read). A
// line over MaxLineBytes is consumed whole and reported tooLong, without
// its bytes.
func (f *lineFeed) readLine() (line []byte, rawLen, quotes int64, tooLong bool, err error) {
	line, err = f.src.ReadSlice('\n')
	quotes = int64(bytes.Count(line, quote))
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, int64(len(line)), quotes, false, err
	}
	acc := append([]byte(nil), line...)
	rawLen = int64(len(line))
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = f.src.ReadSlice('\n')
		rawLen += int64(len(line))
		quotes += int64(bytes.Count(line, quote))
		if len(acc) <= MaxLineBytes {
			acc = append(acc, line...)
		}
	}
	if rawLen > MaxLineBytes {
		return nil, rawLen, quotes, true, err
	}
	return acc, rawLen, quotes, false, err
}

var quote = []byte{'"'}

// skipRecord reads on from a record over the bounds, keeping nothing, to
// the end of the line where its quotes close (or the end of the file), and
// starts the next record there. Inside quotes only the next quote matters,
// so it looks for that, not for lines.
func (f *lineFeed) skipRecord() error {
	for !f.eof && f.quotes%2 == 1 {
		chunk, err := f.src.ReadSlice('"')
		f.raw += int64(len(chunk))
		if err != nil {
			if err = f.skipErr(err); err != nil {
				return err
			}
			continue
		}
		f.quotes++
		if f.quotes%2 == 0 {
			// Out of quotes: the rest of the line decides (a quote there
			// opens another field).
			if err := f.skipLine(); err != nil {
				return err
			}
		}
	}
	f.pending, f.marks = nil, f.marks[:0]
	f.recBytes, f.recLines, f.quotes, f.overflow = 0, 0, 0, nil
	return nil
}

// skipLine reads to the end of the line, counting its quotes.
func (f *lineFeed) skipLine() error {
	for {
		line, err := f.src.ReadSlice('\n')
		f.raw += int64(len(line))
		f.quotes += int64(bytes.Count(line, quote))
		if !errors.Is(err, bufio.ErrBufferFull) {
			return f.skipErr(err)
		}
	}
}

// skipErr notes the end of the file; a read error is fatal.
func (f *lineFeed) skipErr(err error) error {
	switch {
	case err == nil, errors.Is(err, bufio.ErrBufferFull):
		return nil
	case errors.Is(err, io.EOF):
		f.eof = true
		return nil
	}
	f.err = fmt.Errorf("read file: %w", err)
	return f.err
}

// consume drops the marks of the lines up to decoded offset decOff (the
// end of a record) and returns the raw offset there and the first decoding
// problem among them.
func (f *lineFeed) consume(decOff int64) (rawEnd int64, bad error) {
	rawEnd = f.raw - int64(len(f.pending))
	i := 0
	for i < len(f.marks) && f.marks[i].decEnd <= decOff {
		if bad == nil {
			bad = f.marks[i].err
		}
		rawEnd = f.marks[i].rawEnd
		i++
	}
	f.marks = f.marks[i:]
	f.recBytes, f.recLines, f.quotes = 0, 0, 0
	return rawEnd, bad
}
