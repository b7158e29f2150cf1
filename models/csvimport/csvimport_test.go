package csvimport

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// text of each encoding that it can write.
var samples = []struct {
	name string
	enc  encoding.Encoding // nil: the bytes are the UTF-8 text
	text string
}{
	{"Big5", traditionalchinese.Big5, "王小明"},
	{"EUC-JP", japanese.EUCJP, "山田太郎"},
	{"EUC-KR", korean.EUCKR, "홍길동"},
	{"GB2312", simplifiedchinese.GBK, "张伟"},
	{"ISO-2022-JP", japanese.ISO2022JP, "山田 太郎"},
	{"ISO-8859-1", charmap.ISO8859_1, "Jürgen Müller"},
	{"KOI8-R", charmap.KOI8R, "Иван Петров"},
	{"Shift_JIS", japanese.ShiftJIS, "鈴木一郎ｶﾀｶﾅ"},
	{"US-ASCII", nil, "John Smith"},
	{"UTF-8", nil, "Zoë Ødegård 🎉"},
	{"WINDOWS-1251", charmap.Windows1251, "Олена Коваленко"},
	{"X-WINDOWS-ISO2022JP", japanese.ISO2022JP, "佐藤花子"},
}

// csvOf writes a header and rows whose second field holds text with the
// characters CSV must quote.
func csvOf(text string, rows int) (string, [][]string) {
	var b strings.Builder
	want := [][]string{{"Primary Email", "Name"}}
	b.WriteString("Primary Email,Name\r\n")
	for i := 0; i < rows; i++ {
		name := text + `, "the ` + string(rune('A'+i)) + `"`
		if i == 1 {
			name += "\nsecond line"
		}
		want = append(want, []string{"u" + string(rune('a'+i)) + "@example.com", name})
		b.WriteString(want[i+1][0] + `,"` + strings.ReplaceAll(name, `"`, `""`) + "\"\r\n")
	}
	return b.String(), want
}

func encode(t *testing.T, enc encoding.Encoding, s string) []byte {
	t.Helper()
	if enc == nil {
		return []byte(s)
	}
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatalf("encode %q: %v", s, err)
	}
	return b
}

// readAll reads every record of raw from offset on.
func readAll(t *testing.T, raw []byte, enc Encoding, offset, row int64) []Record {
	t.Helper()
	r := NewReader(bytes.NewReader(raw[offset:]), enc, offset, row)
	var out []Record
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

// Every accepted encoding decodes a file it wrote: header, quoted fields
// with commas, quotes and line breaks; and reading again from each row's
// recorded end offset gives the same rows as one pass.
func TestEncodings_RoundTrip(t *testing.T) {
	if len(samples) != len(Names) {
		t.Fatalf("%d samples for %d encodings", len(samples), len(Names))
	}
	for _, s := range samples {
		t.Run(s.name, func(t *testing.T) {
			text, want := csvOf(s.text, 4)
			raw := encode(t, s.enc, text)
			enc, ok := Lookup(strings.ToLower(s.name))
			if !ok || enc.Name != s.name {
				t.Fatalf("Lookup(%q) = %+v, %v", s.name, enc, ok)
			}
			ins, problems := Inspect(raw, true, enc)
			if len(problems) > 0 {
				t.Fatalf("inspect: %+v", problems)
			}
			if !reflect.DeepEqual(ins.Header, want[0]) {
				t.Fatalf("header %q", ins.Header)
			}
			all := readAll(t, raw, ins.Encoding, ins.DataOffset, 1)
			if len(all) != 4 {
				t.Fatalf("%d records", len(all))
			}
			for i, rec := range all {
				if rec.Err != nil || !reflect.DeepEqual(rec.Fields, want[i+1]) || rec.Row != int64(i+1) {
					t.Errorf("row %d: %q %v, want %q", rec.Row, rec.Fields, rec.Err, want[i+1])
				}
				rest := readAll(t, raw, ins.Encoding, rec.End, rec.Row+1)
				if !reflect.DeepEqual(rest, all[i+1:]) && (len(rest) != 0 || i != len(all)-1) {
					t.Errorf("reading from the end of row %d (offset %d) gives %+v", rec.Row, rec.End, rest)
				}
			}
			if all[3].End != int64(len(raw)) {
				t.Errorf("the last row ends at %d of %d bytes", all[3].End, len(raw))
			}
		})
	}
}

// X-WINDOWS-ISO2022JP (CP50220/1) writes half-width katakana with ESC ( I
// and NEC special characters; both decode.
func TestEncodings_WindowsISO2022JPExtensions(t *testing.T) {
	raw := []byte("Primary Email,Name\nu@x.io,\x1b$B;3ED\x1b(I1\x1b$B-!\x1b(B\n")
	enc, _ := Lookup("X-WINDOWS-ISO2022JP")
	ins, problems := Inspect(raw, true, enc)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	recs := readAll(t, raw, ins.Encoding, ins.DataOffset, 1)
	if len(recs) != 1 || recs[0].Err != nil || recs[0].Fields[1] != "山田ｱ①" {
		t.Fatalf("%+v", recs)
	}
}

// GB2312 text in HZ form (7-bit, ~{ ~} escapes) is read as HZ-GB-2312.
func TestEncodings_GB2312AsHZ(t *testing.T) {
	text, want := csvOf("张伟", 2)
	raw := encode(t, simplifiedchinese.HZGB2312, text)
	enc, _ := Lookup("GB2312")
	ins, problems := Inspect(raw, true, enc)
	if len(problems) > 0 || ins.Encoding.Name != HZ {
		t.Fatalf("%+v %+v", ins, problems)
	}
	recs := readAll(t, raw, ins.Encoding, ins.DataOffset, 1)
	if len(recs) != 2 || !reflect.DeepEqual(recs[1].Fields, want[2]) {
		t.Fatalf("%+v", recs)
	}
	plain := encode(t, simplifiedchinese.GBK, text)
	if ins, _ := Inspect(plain, true, enc); ins.Encoding.Name != GBK {
		t.Errorf("8-bit GB2312 read as %s", ins.Encoding.Name)
	}
}

// A row that does not decode fails alone; the rows after it are read.
func TestReader_BadRowFailsAlone(t *testing.T) {
	for _, tc := range []struct {
		enc string
		bad string
	}{
		{"US-ASCII", "caf\xe9"},
		{"UTF-8", "caf\xe9"},
		{"Shift_JIS", "\x81\x20"},
		{"EUC-KR", "\xff\xff"},
		{"ISO-2022-JP", "\x1b$B\x7f\x7f\x1b(B"},
	} {
		t.Run(tc.enc, func(t *testing.T) {
			raw := []byte("a,b\nx@y.z,ok\n" + tc.bad + ",b\n\"q@y.z\",fine\n")
			enc, _ := Lookup(tc.enc)
			ins, problems := Inspect(raw[:4], false, enc)
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			recs := readAll(t, raw, ins.Encoding, ins.DataOffset, 1)
			if len(recs) != 3 || recs[0].Err != nil || !errors.Is(recs[1].Err, ErrInvalidEncoding) || recs[2].Err != nil || recs[2].Fields[1] != "fine" {
				t.Fatalf("%+v", recs)
			}
			if _, problems := Inspect(raw, true, enc); len(problems) != 1 || problems[0].Title != CauseInvalidEncoding {
				t.Errorf("inspect of the whole file: %+v", problems)
			}
		})
	}
}

// Blank records are skipped, malformed ones fail alone, a line over the
// limit fails its row, and a UTF-8 byte order mark is not part of the header.
func TestReader_Oddities(t *testing.T) {
	enc, _ := Lookup("UTF-8")
	long := strings.Repeat("x", MaxLineBytes+10)
	raw := []byte("\xEF\xBB\xBFPrimary Email,Name\n\n , \na@b.c,bad\"quote\n" + long + "\nd@e.f,last")
	ins, problems := Inspect(raw[:100], false, enc)
	if len(problems) > 0 || ins.Header[0] != "Primary Email" {
		t.Fatalf("%+v %+v", ins, problems)
	}
	recs := readAll(t, raw, enc, ins.DataOffset, 1)
	if len(recs) != 3 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	if recs[0].Err == nil || !strings.Contains(recs[0].Err.Error(), "malformed CSV") {
		t.Errorf("bad quote: %+v", recs[0])
	}
	if !errors.Is(recs[1].Err, ErrLineTooLong) || recs[1].Row != 2 {
		t.Errorf("long line: %v", recs[1].Err)
	}
	if recs[2].Err != nil || recs[2].Fields[0] != "d@e.f" || recs[2].End != int64(len(raw)) {
		t.Errorf("last: %+v", recs[2])
	}
}

func TestCheckHeader(t *testing.T) {
	needs := []Need{{"Email Address", "Email OTP"}, {"TOTP Secret", "TOTP"}}
	users := []string{"Primary Email", "Employee ID"}
	cols, problems := CheckHeader([]string{" totp secret", "EMPLOYEE ID", "Email Address"}, users, needs)
	if len(problems) > 0 || cols.UserColumn != "Employee ID" || cols.Index["TOTP Secret"] != 0 || cols.Index["Email Address"] != 2 {
		t.Fatalf("%+v %+v", cols, problems)
	}
	_, problems = CheckHeader([]string{"Email Address", "email address", "x", ""}, users, needs)
	var titles []string
	for _, p := range problems {
		titles = append(titles, p.Title)
	}
	if strings.Join(titles, ",") != "DUPLICATE_COLUMNS,UNKNOWN_COLUMNS,MISSING_COLUMNS" ||
		!strings.Contains(problems[1].Detail, "column 4 has no name") || !strings.Contains(problems[2].Detail, "TOTP Secret") {
		t.Errorf("%+v", problems)
	}
}

func TestLookup(t *testing.T) {
	for _, n := range Names {
		if e, ok := Lookup(strings.ToUpper(n)); !ok || e.Name != n {
			t.Errorf("%s: %+v", n, e)
		}
	}
	if _, ok := Lookup("EBCDIC"); ok {
		t.Error("EBCDIC accepted")
	}
}

// quotedNewlines streams a record whose quoted field holds n line feeds,
// between a row before and a row after it, without holding it in memory.
func quotedNewlines(n int64) io.Reader {
	return io.MultiReader(
		strings.NewReader("a@b.c,first\nx@y.z,\""),
		io.LimitReader(repeatByte('\n'), n),
		strings.NewReader("\"\nd@e.f,after\n"),
	)
}

type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// A record over the bounds fails its row alone, whatever its size, without
// the reader growing: a quoted field of 1 GiB of line feeds (64 MiB with
// -short), streamed; too many lines; too many fields. The rows after it are
// read, and a reader started after it reads on.
func TestReader_RecordBounds(t *testing.T) {
	enc, _ := Lookup("UTF-8")
	size := int64(1 << 30)
	if testing.Short() {
		size = 64 << 20
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	began := time.Now()
	r := NewReader(quotedNewlines(size), enc, 0, 1)
	var recs []Record
	var peak uint64
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
		runtime.ReadMemStats(&after)
		peak = max(peak, after.HeapInuse)
	}
	t.Logf("%d MiB of line feeds in quotes read in %v", size>>20, time.Since(began))
	if len(recs) != 3 || recs[0].Err != nil || !errors.Is(recs[1].Err, ErrRecordTooLong) || recs[1].Row != 2 ||
		recs[2].Err != nil || recs[2].Fields[0] != "d@e.f" || recs[2].Row != 3 {
		t.Fatalf("records %+v", recs)
	}
	if want := int64(len("a@b.c,first\nx@y.z,\"")) + size + 2; recs[1].End != want {
		t.Errorf("the long record ends at %d, want %d", recs[1].End, want)
	}
	if peak > before.HeapInuse+32<<20 {
		t.Errorf("the heap grew to %d MiB reading one long record", peak>>20)
	}
	// Reading again from the row after it (what a chunk activity does).
	again := NewReader(strings.NewReader("d@e.f,after\n"), enc, recs[1].End, 3)
	if rec, err := again.Read(); err != nil || rec.Row != 3 || rec.Fields[1] != "after" {
		t.Errorf("resume: %+v %v", rec, err)
	}

	lines := "h1,h2\n\"" + strings.Repeat("x\n", MaxRecordLines+1) + "\",y\nlast,row\n"
	recs = readAll(t, []byte(lines), enc, 0, 0)
	if len(recs) != 3 || !errors.Is(recs[1].Err, ErrRecordTooLong) || recs[2].Fields[0] != "last" {
		t.Errorf("too many lines: %+v", recs)
	}
	fields := "h1,h2\n" + strings.Repeat("f,", MaxFields) + "f\nlast,row\n"
	recs = readAll(t, []byte(fields), enc, 0, 0)
	if len(recs) != 3 || !errors.Is(recs[1].Err, ErrTooManyFields) || recs[2].Fields[0] != "last" {
		t.Errorf("too many fields: %d records, %v", len(recs), recs[1].Err)
	}
	// Blank lines between rows are no record's lines.
	blank := "h1,h2\n" + strings.Repeat("\n", MaxRecordLines+5) + "a,b\n"
	recs = readAll(t, []byte(blank), enc, 0, 0)
	if len(recs) != 2 || recs[1].Err != nil || recs[1].Fields[0] != "a" {
		t.Errorf("blank lines: %+v", recs)
	}
	// A quote that never closes: the rest of the file is that one row.
	open := "h1,h2\n\"" + strings.Repeat("x,\"\"y\n", 300000)
	recs = readAll(t, []byte(open), enc, 0, 0)
	if len(recs) != 2 || !errors.Is(recs[1].Err, ErrRecordTooLong) || recs[1].End != int64(len(open)) {
		t.Errorf("unclosed quote: %d records", len(recs))
	}
}
