#!/usr/bin/env bash
# Every text of a plot lies inside its canvas: titles, axis labels, tic labels and the key (nothing clipped).
# Reads gnuplot's SVGs: each text is a <g transform="translate(X,Y)[ rotate(R)]" ... font-size="S" text-anchor="A">
# followed by its <text>; its width is estimated at 0.75 x S per character (pngcairo draws the same font wider than
# the SVG's 0.5-0.6 x S, and the PNG is what a reader sees), its height S. A text is clipped when that box leaves the
# viewBox. Usage: check_plot_text_fits.sh SVG...   (prints each clipped text; exit 1 on any)
set -euo pipefail
status=0
for svg in "$@"; do
  awk -v file="$svg" '
    function unescape(s) { gsub(/<[^>]*>/, "", s); gsub(/&amp;/, "\\&", s); gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s);
                           gsub(/&quot;/, "\"", s); gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
    /viewBox="/ { match($0, /viewBox="[^"]*"/); split(substr($0, RSTART + 9, RLENGTH - 10), vb, " "); W = vb[3]; H = vb[4] }
    /<g transform="translate\(/ {
      match($0, /translate\([-0-9.]+,[-0-9.]+\)/); split(substr($0, RSTART + 10, RLENGTH - 11), xy, ",")
      x = xy[1] + 0; y = xy[2] + 0; rot = 0
      if (match($0, /rotate\([-0-9.]+\)/)) rot = substr($0, RSTART + 7, RLENGTH - 8) + 0
      size = 10; if (match($0, /font-size="[0-9.]+"/)) size = substr($0, RSTART + 11, RLENGTH - 12) + 0
      anchor = "start"; if (match($0, /text-anchor="[a-z]+"/)) anchor = substr($0, RSTART + 13, RLENGTH - 14)
      pending = 1; next
    }
    pending && /<text>/ {
      pending = 0; t = unescape($0); if (t == "") next
      w = 0.75 * size * length(t)
      lo = anchor == "middle" ? -w / 2 : anchor == "end" ? -w : 0; hi = lo + w
      if (rot == 270 || rot == -90) { y0 = y - hi; y1 = y - lo; x0 = x - size; x1 = x }
      else if (rot == 90) { y0 = y + lo; y1 = y + hi; x0 = x; x1 = x + size }
      else { x0 = x + lo; x1 = x + hi; y0 = y - size; y1 = y }
      if (x0 < 0 || y0 < 0 || x1 > W || y1 > H) {
        printf "%s: clipped text \"%s\" (%.0f..%.0f x %.0f..%.0f on a %sx%s canvas)\n", file, t, x0, x1, y0, y1, W, H
        bad = 1
      }
    }
    END { exit bad }
  ' "$svg" || status=1
done
exit $status
