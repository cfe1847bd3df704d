package tabular

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeaderEmptyAndDuplicateNames(t *testing.T) {
	t.Parallel()
	r, rows, err := readAll(t, "Name,,name,Name, ,Name\n1,2,3,4,5,6\n", Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"Name", "column_2", "name", "Name_2", "column_5", "Name_3"}, r.Header())
	require.Equal(t, []string{"name", "column_2", "name_2", "name_3", "column_5", "name_4"}, r.Keys())
	require.Len(t, rows[0].Fields, 6)
	require.Empty(t, rows[0].Err)
}

func TestHeaderKeepsNamesAsInFile(t *testing.T) {
	t.Parallel()
	r, _, err := readAll(t, "\" Product Name \",Price (€),Größe\n", Options{})
	require.NoError(t, err)
	require.Equal(t, []string{" Product Name ", "Price (€)", "Größe"}, r.Header())
	require.Equal(t, []string{"product_name", "price", "größe"}, r.Keys())
}

func TestHeaderSymbolOnlyNames(t *testing.T) {
	t.Parallel()
	r, _, err := readAll(t, "€,#,%\n", Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"€", "#", "%"}, r.Header())
	require.Equal(t, []string{"column_1", "column_2", "column_3"}, r.Keys())
}

func TestDedupe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"a", "b"}, []string{"a", "b"}},
		{[]string{"a", "a", "a"}, []string{"a", "a_2", "a_3"}},
		// A name the file uses itself is not handed out as a suffix.
		{[]string{"a", "a", "a_2"}, []string{"a", "a_3", "a_2"}},
		{[]string{"a_2", "a", "a"}, []string{"a_2", "a", "a_3"}},
		{[]string{"x", "x", "x_2", "x_2"}, []string{"x", "x_3", "x_2", "x_2_2"}},
		{[]string{}, []string{}},
	} {
		got := dedupe(append([]string(nil), tc.in...), nil)
		require.Equal(t, len(tc.want), len(got))
		if len(tc.want) > 0 {
			require.Equal(t, tc.want, got, "in %q", tc.in)
		}
		seen := map[string]bool{}
		for _, n := range got {
			require.False(t, seen[n], "duplicate %q", n)
			seen[n] = true
		}
	}
}

func TestNormalizeKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"  Product Name ":       "product_name",
		"Price (€)":             "price",
		"€":                     "",
		"":                      "",
		"   ":                   "",
		"__id__":                "id",
		"E-Mail Address":        "e_mail_address",
		"first.name":            "first_name",
		"CamelCase":             "camelcase",
		"Größe":                 "größe",
		"ÉTÉ 2024":              "été_2024",
		"Cafe\u0301 Name":       "cafe\u0301_name",
		"\u0301x":               "x",
		"日本 語":                  "日本_語",
		"Area (m²)":             "area_m²",
		"a\tb\nc":               "a_b_c",
		"tab\xffbad":            "tab_bad",
		"already_normal_key_1":  "already_normal_key_1",
		"Ünïcödé   --  Śtüff!!": "ünïcödé_śtüff",
		"ΣΊΣΥΦΟΣ":               "σίσυφοσ",
		"100%":                  "100",
	} {
		require.Equal(t, want, NormalizeKey(in), "NormalizeKey(%q)", in)
	}
}

func TestHeaderMultiLineAndCollidingNames(t *testing.T) {
	t.Parallel()
	// The blank second column's made-up name yields to the file's own.
	r, rows, err := readAll(t, "\"Total\r\nAmount\",,column_2,E-Mail,e mail,E_MAIL\n1,2,3,4,5,6\n", Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"Total\r\nAmount", "column_2_2", "column_2", "E-Mail", "e mail", "E_MAIL"}, r.Header())
	require.Equal(t, []string{"total_amount", "column_2_2", "column_2", "e_mail", "e_mail_2", "e_mail_3"}, r.Keys())
	require.Equal(t, 3, rows[0].Line)
}

func TestHeaderSingleColumn(t *testing.T) {
	t.Parallel()
	r, rows, err := readAll(t, "Name\nann\n\nbob\n", Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"Name"}, r.Header())
	require.Equal(t, []string{"name"}, r.Keys())
	require.Equal(t, [][]string{{"ann"}, {"bob"}}, fields(rows))
}
