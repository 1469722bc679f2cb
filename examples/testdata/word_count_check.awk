# Folds the changelog of sluice-example-word-count (+I,word,1 then
# +U,word,2 ...) into one "word,count" line per word, after checking that
# the rows of each word count 1, 2, 3 ... in order.  Prints nothing and
# exits 1 on a bad row.  Used by the ctest entry sl-it-example-word-count.
BEGIN { FS = ","; failed = 0 }
{
  if (NF != 3 || $3 !~ /^[0-9]+$/) fail("bad row " NR ": " $0)
  w = $2
  n = $3 + 0
  if (n != last[w] + 1) fail("row " NR ": count of '" w "' is not " last[w] + 1)
  if ((n == 1 && $1 != "+I") || (n > 1 && $1 != "+U"))
    fail("row " NR ": wrong row kind: " $0)
  last[w] = n
}
END {
  if (failed) exit 1
  for (w in last) print w "," last[w]
}
function fail(msg) {
  print "word-count check: " msg > "/dev/stderr"
  failed = 1
  exit 1
}
