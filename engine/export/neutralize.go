package export

// Neutralize makes one cell safe to open in a spreadsheet: a cell that starts
// with '=', '+', '-', '@', a tab or a carriage return, which Excel, LibreOffice
// and Google Sheets would read as a formula, gets a leading single quote,
// unless the whole cell is a decimal number ("-5", "+1", "-1.5e3"), which a
// spreadsheet reads as that number. Any other cell is returned unchanged.
//
// A number is what strconv.ParseFloat accepts in decimal notation: an
// optional sign, digits with an optional decimal point (at least one digit),
// and an optional exponent. Out-of-range values such as "-1e999" count as
// numbers; "-Inf", "-NaN" and hexadecimal floats, which ParseFloat also
// accepts but spreadsheets do not, do not.
func Neutralize(cell string) string {
	if cell == "" {
		return cell
	}
	switch cell[0] {
	case '=', '+', '-', '@', '\t', '\r':
	default:
		return cell
	}
	if isDecimal(cell) {
		return cell
	}
	return "'" + cell
}

// isDecimal reports whether s is a decimal floating-point literal:
// [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}
