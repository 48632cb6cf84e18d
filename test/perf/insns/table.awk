# table.awk: instructions per op from the INSNS and ILABEL lines that
# test/perf/insns/plugin.c and a guest script print (insns.sh, slowloop.sh):
# per case and side, the difference of the N2 and N1 runs over N2-N1, in the
# kernel, in goverbs' Go code, in rdma-core's user code, in all user code,
# and the ratios goverbs/rdma-core.
  /^INSNS / { for (i = 3; i <= NF; i++) { split($i, kv, "="); c[$2, kv[1]] = kv[2] } }
  /^ILABEL / { a = $2; b = $3; k = $4 SUBSEP $5; if (!(k in n1)) { n1[k] = $6; r1k[k] = a SUBSEP b }
               else { n2[k] = $6; r2k[k] = a SUBSEP b }
               if (!($4 in seen)) { seen[$4] = 1; order[++nc] = $4 } }
  function d(r, f,   p) { split(r, p, SUBSEP); return c[p[2], f] - c[p[1], f] }
  function per(k, f) { return (d(r2k[k], f) - d(r1k[k], f)) / (n2[k] - n1[k]) }
  # row: prints case i's line for side from the counters named pre kernel,
  # pre go, ... ("" for the whole guest, "v" for the plugin's vcpu=N), and
  # leaves its user and total in U[side] and T[side].
  function row(i, side, pre,   k, kern, g, r, u) {
    k = order[i] SUBSEP side
    kern = per(k, pre "kernel"); g = per(k, pre "go"); r = per(k, pre "exe") + per(k, pre "lib")
    u = g + r + per(k, pre "other")
    U[side] = u; T[side] = kern + u
    printf "%-22s %-9s %10.0f %10.0f %10.0f %10.0f %10.0f\n", order[i], side, kern, g, r, u, kern + u
  }
  function head(what) {
    printf "%-22s %-9s %10s %10s %10s %10s %10s  (%s)\n", "case", "side", "kernel", "go", "rdma-core", "user", "total", what
  }
  END {
    head("instructions per op")
    for (i = 1; i <= nc; i++) {
      for (s = 1; s <= 2; s++) {
        side = (s == 1) ? "goverbs" : "rdma-core"
        if ((order[i] SUBSEP side) in n2) row(i, side, "")
      }
      if (U["rdma-core"] > 0 && T["rdma-core"] > 0)
        printf "%-22s %-9s %43s user %.2f, total %.2f\n", order[i], "ratio", "", U["goverbs"] / U["rdma-core"], T["goverbs"] / T["rdma-core"]
      delete U; delete T
    }
    # with the plugin's vcpu=N: the same for that vCPU alone
    for (i = 1; i <= nc; i++) {
      for (s = 1; s <= 2; s++) {
        side = (s == 1) ? "goverbs" : "rdma-core"; k = order[i] SUBSEP side
        split(r2k[k], p2, SUBSEP)
        if (!(k in n2) || !((p2[2], "vkernel") in c)) continue
        if (!vhead++) { printf "\n"; head("instructions per op on the one vCPU counted") }
        row(i, side, "v")
      }
    }
  }
