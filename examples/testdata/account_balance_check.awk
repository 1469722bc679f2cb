# Checks the balance changelog of sluice-example-account-balance written
# for -v records=N -v keys=K: the header; +I the first time an account
# appears; then -U repeating the account's current balance and +U with the
# new one, which differs by one transaction amount (-1000..1000, not 0);
# every account 0..K-1 present; and 2N - K rows in all (every account of
# K appears for the N used by the test).  Applying the changelog leaves one
# row per account; their number and the sum of the final balances are
# printed.  Used by the ctest entry sl-it-example-account-balance.
BEGIN { FS = ","; failed = 0; n_rows = 0; n_accounts = 0 }
NR == 1 {
  if ($0 != "op,account,balance") fail("bad header: " $0)
  next
}
{
  n_rows++
  if (NF != 3 || $2 !~ /^[0-9]+$/ || $3 !~ /^-?[0-9]+$/)
    fail("bad row " NR ": " $0)
  a = $2 + 0
  b = $3 + 0
  if (a >= keys) fail("row " NR ": account " a " is not below " keys)
  if ($1 == "+I") {
    if (a in bal) fail("row " NR ": account " a " inserted twice")
    if (b == 0 || b < -1000 || b > 1000) fail("row " NR ": first amount " b)
    bal[a] = b
    n_accounts++
  } else if ($1 == "-U") {
    if (!(a in bal)) fail("row " NR ": -U of unknown account " a)
    if (a in retracted) fail("row " NR ": two -U rows for account " a)
    if (bal[a] != b)
      fail("row " NR ": -U of account " a " says " b ", balance is " bal[a])
    retracted[a] = 1
  } else if ($1 == "+U") {
    if (!(a in retracted)) fail("row " NR ": +U without -U for account " a)
    d = b - bal[a]
    if (d == 0 || d < -1000 || d > 1000)
      fail("row " NR ": account " a " changed by " d)
    delete retracted[a]
    bal[a] = b
  } else {
    fail("row " NR ": bad row kind " $1)
  }
}
END {
  if (failed) exit 1
  for (a in retracted) fail("account " a ": -U without +U")
  if (n_accounts != keys) fail(n_accounts " accounts, expected " keys)
  if (n_rows != 2 * records - keys)
    fail(n_rows " rows, expected " 2 * records - keys)
  total = 0
  for (a in bal) total += bal[a]
  print n_accounts " accounts, total balance " total
}
function fail(msg) {
  print "account-balance check: " msg > "/dev/stderr"
  failed = 1
  exit 1
}
