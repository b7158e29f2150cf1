package jsonout

import "time"

// endOfYear9999 is the first second (Unix time) of year 10000.
const endOfYear9999 = 253402300800

// AppendTimeUTC appends t in UTC as a JSON string, byte for byte as
// encoding/json writes t.UTC(): RFC 3339 with the fraction of a second
// trimmed of trailing zeros (none when it is zero) and "Z". Between 1970
// and 9999 it computes the text from the Unix time with a table of digits,
// at half of time.Time.AppendFormat's cost (which parses its layout);
// other times go through AppendFormat.
func AppendTimeUTC(b []byte, t time.Time) []byte {
	secs := t.Unix()
	if secs < 0 || secs >= endOfYear9999 {
		b = append(b, '"')
		b = t.UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	}
	year, month, day := civilDate(secs / 86400)
	sod := secs % 86400
	hour, minute, second := sod/3600, sod/60%60, sod%60
	b = append(b, '"',
		digits3[year/100][1], digits3[year/100][2], digits3[year%100][1], digits3[year%100][2], '-',
		digits3[month][1], digits3[month][2], '-',
		digits3[day][1], digits3[day][2], 'T',
		digits3[hour][1], digits3[hour][2], ':',
		digits3[minute][1], digits3[minute][2], ':',
		digits3[second][1], digits3[second][2])
	if ns := t.Nanosecond(); ns != 0 {
		hi, mid, lo := ns/1000000, ns/1000%1000, ns%1000
		b = append(b, '.', digits3[hi][0], digits3[hi][1], digits3[hi][2])
		switch {
		case lo != 0:
			b = append(b, digits3[mid][0], digits3[mid][1], digits3[mid][2], digits3[lo][0], digits3[lo][1], digits3[lo][2])
		case mid != 0:
			b = append(b, digits3[mid][0], digits3[mid][1], digits3[mid][2])
		}
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	return append(b, 'Z', '"')
}

// digits3 holds the three digits of 0–999.
var digits3 = func() (t [1000][3]byte) {
	for i := range t {
		t[i] = [3]byte{"0123456789"[i/100], "0123456789"[i/10%10], "0123456789"[i%10]}
	}
	return t
}()

// civilDate turns days since 1970-01-01 (not negative) into the proleptic
// Gregorian date, by the inverse of Howard Hinnant's days_from_civil
// (https://howardhinnant.github.io/date_algorithms.html#civil_from_days).
func civilDate(days int64) (year, month, day int64) {
	z := days + 719468
	era := z / 146097
	doe := z - era*146097                                  // day of the era, 0–146096
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of the era, 0–399
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of the year from March 1, 0–365
	mp := (5*doy + 2) / 153                                // month from March, 0–11
	day = doy - (153*mp+2)/5 + 1
	month = mp + 3
	if mp >= 10 {
		month = mp - 9
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}
