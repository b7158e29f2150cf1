// Package csvimport reads uploaded CSV files: the twelve file encodings of
// quick enrollment, the header checks, and a row reader that knows the byte
// offset at which each row ends, so that a job can read its file chunk by
// chunk from any row boundary without reading from the start again.
//
// Decoding is done line by line on the raw bytes: in every supported
// encoding the byte 0x0A is a line feed and nothing else, so a line is cut
// before decoding, and a line that does not decode spoils its own row only.
package csvimport

import (
	"bytes"
	"errors"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

// Names lists the file_encoding values accepted at upload (spec 4.4).
var Names = []string{
	"Big5", "EUC-JP", "EUC-KR", "GB2312", "ISO-2022-JP", "ISO-8859-1",
	"KOI8-R", "Shift_JIS", "US-ASCII", "UTF-8", "WINDOWS-1251", "X-WINDOWS-ISO2022JP",
}

// Decoders resolved from GB2312: GB2312 text is read as GBK (EUC-CN is a
// subset of it), or as HZ-GB-2312 when the text is 7-bit with HZ escapes.
const (
	GBK = "GBK"
	HZ  = "HZ-GB-2312"
)

// ErrInvalidEncoding is the error of a line that does not decode.
var ErrInvalidEncoding = errors.New("not valid text in the chosen encoding")

// Encoding decodes lines of one file encoding into UTF-8.
type Encoding struct {
	// Name is the encoding's name as accepted (or the resolved GBK or HZ).
	Name string
	enc  encoding.Encoding // nil for UTF-8 and US-ASCII
}

var table = map[string]encoding.Encoding{
	"BIG5":                traditionalchinese.Big5,
	"EUC-JP":              japanese.EUCJP,
	"EUC-KR":              korean.EUCKR,
	"GB2312":              simplifiedchinese.GBK,
	GBK:                   simplifiedchinese.GBK,
	HZ:                    simplifiedchinese.HZGB2312,
	"ISO-2022-JP":         japanese.ISO2022JP,
	"X-WINDOWS-ISO2022JP": japanese.ISO2022JP, // CP50220/1: the decoder reads its katakana and NEC rows too
	"ISO-8859-1":          charmap.ISO8859_1,
	"KOI8-R":              charmap.KOI8R,
	"SHIFT_JIS":           japanese.ShiftJIS,
	"WINDOWS-1251":        charmap.Windows1251,
	"US-ASCII":            nil,
	"UTF-8":               nil,
}

// Lookup returns the encoding of a file_encoding value (or a resolved
// decoder name), compared without regard to case.
func Lookup(name string) (Encoding, bool) {
	key := strings.ToUpper(strings.TrimSpace(name))
	enc, ok := table[key]
	if !ok {
		return Encoding{}, false
	}
	return Encoding{Name: canonical[key], enc: enc}, true
}

// canonical maps an upper-cased name to its spelling in Names.
var canonical = func() map[string]string {
	m := map[string]string{strings.ToUpper(GBK): GBK, strings.ToUpper(HZ): HZ}
	for _, n := range Names {
		m[strings.ToUpper(n)] = n
	}
	return m
}()

// Resolve picks the decoder for a file of encoding name whose first bytes
// are sample: GB2312 becomes HZ-GB-2312 when the sample is 7-bit and holds
// an HZ escape, GBK otherwise. Other encodings are returned as they are.
func Resolve(enc Encoding, sample []byte) Encoding {
	if enc.Name != "GB2312" {
		return enc
	}
	if bytes.Contains(sample, []byte("~{")) && isASCII(sample) {
		e, _ := Lookup(HZ)
		return e
	}
	e, _ := Lookup(GBK)
	return e
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// decoder decodes one line at a time.
type decoder struct {
	name string
	dec  *encoding.Decoder
}

func (e Encoding) newDecoder() *decoder {
	d := &decoder{name: strings.ToUpper(e.Name)}
	if e.enc != nil {
		d.dec = e.enc.NewDecoder()
	}
	return d
}

// decodeLine returns line in UTF-8. On invalid input it returns the text
// with U+FFFD for what did not decode, and ErrInvalidEncoding. The result
// is valid until the next call.
func (d *decoder) decodeLine(line []byte) ([]byte, error) {
	switch d.name {
	case "UTF-8":
		if utf8.Valid(line) {
			return line, nil
		}
		return bytes.ToValidUTF8(line, []byte("\uFFFD")), ErrInvalidEncoding
	case "US-ASCII":
		if isASCII(line) {
			return line, nil
		}
		return bytes.Map(func(r rune) rune {
			if r >= 0x80 {
				return utf8.RuneError
			}
			return r
		}, line), ErrInvalidEncoding
	}
	if isASCII(line) && d.name != "HZ-GB-2312" && d.name != "ISO-2022-JP" && d.name != "X-WINDOWS-ISO2022JP" {
		return line, nil // every other encoding is ASCII below 0x80
	}
	d.dec.Reset()
	out, err := d.dec.Bytes(line)
	if err != nil {
		return out, ErrInvalidEncoding
	}
	if bytes.ContainsRune(out, utf8.RuneError) {
		// None of these encodings can write U+FFFD: it stands for bytes
		// that did not decode.
		return out, ErrInvalidEncoding
	}
	return out, nil
}
