# samples.awk: where the host's time went, from the SAMPLES/SAMPLE and
# ILABEL lines of test/perf/insns/plugin.c's sampling mode (insns.sh and
# slowloop.sh with SAMPLE=US): per case and side, host microseconds per op,
# then the most sampled functions of the N2 run and, per op, of the N2 run
# less the N1 run, named from the guest's
# kernel symbols (ksyms) and the Go binaries' (gsyms: "binary address
# name" lines). Variables: period (SAMPLE), top, ksyms, gsyms, gotab (the
# Go binary a case's samples are named from), rstab (that binary for
# cases named rstream*, if set).
  function hex(h,   i, v, c) { v = 0; h = tolower(h); sub(/^0x/, "", h)
    for (i = 1; i <= length(h); i++) { c = index("0123456789abcdef", substr(h, i, 1)) - 1; v = v * 16 + c }
    return v }
  function find(tab, n, va,   lo, hi, mid) { lo = 1; hi = n; if (n == 0 || va < A[tab, 1]) return ""
    while (lo < hi) { mid = int((lo + hi + 1) / 2); if (A[tab, mid] <= va) lo = mid; else hi = mid - 1 }
    return N[tab, lo] }
  # name_samples fills out with run q's samples by function name.
  function name_samples(q, tab, out,   j, a, name) {
    for (j = 1; j <= top_n[q]; j++) {
      a = TA[q, j]
      if (a ~ /^0xffff/) name = "[k] " find("k", nk, hex(substr(a, 7)))
      else if (hex(a) < 268435456) name = "[go] " find(tab, ng[tab], hex(a))
      else if (a ~ /^0x7f/) name = "[lib]"
      else if (a ~ /^0x5/) name = "[exe]"
      else name = "[other]"
      out[name] += TC[q, j]
    } }
  # sort_desc orders FN[1..m] by FC, largest first.
  function sort_desc(m,   x, y, t) {
    for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (FC[y] > FC[x]) { t = FC[x]; FC[x] = FC[y]; FC[y] = t; t = FN[x]; FN[x] = FN[y]; FN[y] = t } }
  BEGIN {
    # kernel addresses above 2^53 lose their low bits in awk doubles: key
    # them by their low 44 bits, the same for the samples.
    while ((getline l < ksyms) > 0) { split(l, f, " "); nk++; A["k", nk] = hex(substr(f[1], 5)); N["k", nk] = f[3] }
    while ((getline l < gsyms) > 0) { split(l, f, " "); t = f[1]; ng[t]++; A[t, ng[t]] = hex(f[2]); N[t, ng[t]] = f[3] }
    if (nk == 0) print "no kernel symbols from the guest" > "/dev/stderr"
  }
  /^SAMPLES / { for (i = 3; i <= NF; i++) { split($i, kv, "="); S[$2, kv[1]] = kv[2] } }
  /^SAMPLE / { top_n[$2]++; TA[$2, top_n[$2]] = $3; TC[$2, top_n[$2]] = $4 }
  /^ILABEL / { k = $4 SUBSEP $5; if (!(k in n1)) { n1[k] = $6; r1[k] = $3 } else { n2[k] = $6; r2[k] = $3 }
               if (!($4 in seen)) { seen[$4] = 1; order[++nc] = $4 } }
  function per(k, f) { return (S[r2[k], f] - S[r1[k], f]) * period / (n2[k] - n1[k]) }
  END {
    printf "%-22s %-9s %9s %9s %9s %9s %9s  (host microseconds per op, sampled every %d us)\n", "case", "side", "idle", "kernel", "go", "rdma-core", "busy", period
    for (i = 1; i <= nc; i++) for (s = 1; s <= 2; s++) {
      side = (s == 1) ? "goverbs" : "rdma-core"; k = order[i] SUBSEP side
      if (!(k in n2)) continue
      kern = per(k, "kernel"); g = per(k, "go"); r = per(k, "exe") + per(k, "lib")
      printf "%-22s %-9s %9.1f %9.1f %9.1f %9.1f %9.1f\n", order[i], side, per(k, "idle"), kern, g, r, kern + g + r + per(k, "other")
    }
    for (i = 1; i <= nc; i++) for (s = 1; s <= 2; s++) {
      side = (s == 1) ? "goverbs" : "rdma-core"; k = order[i] SUBSEP side
      if (!(k in n2)) continue
      q = r2[k]; tab = (rstab != "" && order[i] ~ /^rstream/) ? rstab : gotab
      tot = S[q, "kernel"] + S[q, "go"] + S[q, "exe"] + S[q, "lib"] + S[q, "other"]
      printf "\n%s, %s, %d-op run: %d busy samples, %d idle; the most sampled:\n", order[i], side, n2[k], tot, S[q, "idle"]
      name_samples(q, tab, F)
      m = 0; for (nm in F) { m++; FN[m] = nm; FC[m] = F[nm] }
      sort_desc(m)
      for (x = 1; x <= m && x <= top; x++) printf "  %6d %5.1f%%  %s\n", FC[x], tot ? 100 * FC[x] / tot : 0, FN[x]
      delete FN; delete FC
      # The same per op: the N2 run's samples less the N1 run's (start-up
      # and exit cancel), in host microseconds; names below the plugin's
      # 400 busiest blocks in either run are left out.
      name_samples(r1[k], tab, G)
      m = 0; for (nm in F) if (nm in G) { m++; FN[m] = nm; FC[m] = (F[nm] - G[nm]) * period / (n2[k] - n1[k]) }
      sort_desc(m)
      printf "%s, %s, per op (the %d-op run less the %d-op run), host microseconds:\n", order[i], side, n2[k], n1[k]
      for (x = 1; x <= m && x <= top; x++) printf "  %8.2f  %s\n", FC[x], FN[x]
      delete FN; delete FC; delete F; delete G
    }
  }
