package main

import (
	"fmt"
	"strings"
)

// beginMarker and endMarker enclose a generated section of a page: the text
// between them is replaced, the rest of the page is kept as written.
func beginMarker(name string) string { return "<!-- BEGIN GENERATED: " + name + " -->" }
func endMarker(name string) string   { return "<!-- END GENERATED: " + name + " -->" }

// replaceSection returns page with the lines between the markers of
// section name replaced by body. Each marker must be a line of its own, once,
// begin before end.
func replaceSection(page, name, body string) (string, error) {
	lines := strings.SplitAfter(page, "\n")
	find := func(what, marker string) (int, error) {
		at, n := -1, 0
		for i, l := range lines {
			if strings.TrimRight(l, "\n") == marker {
				at, n = i, n+1
			}
		}
		if n != 1 {
			return 0, fmt.Errorf("section %s: %d %s markers (%q on a line of its own), want 1", name, n, what, marker)
		}
		return at, nil
	}
	begin, err := find("begin", beginMarker(name))
	if err != nil {
		return "", err
	}
	end, err := find("end", endMarker(name))
	if err != nil {
		return "", err
	}
	if end < begin {
		return "", fmt.Errorf("section %s: the end marker comes before the begin marker", name)
	}
	body = strings.TrimRight(body, "\n") + "\n"
	return strings.Join(lines[:begin+1], "") + body + strings.Join(lines[end:], ""), nil
}

// cell makes text fit in a Markdown table cell: one line, pipes escaped.
func cell(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	return strings.ReplaceAll(text, "|", `\|`)
}

// code is text as inline code in a table cell; empty text gives an empty cell.
func code(text string) string {
	if text == "" {
		return ""
	}
	text = strings.ReplaceAll(cell(text), "`", "'")
	return "`" + text + "`"
}

// table renders a Markdown table; every cell is already rendered.
func table(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat("---|", len(header)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}
