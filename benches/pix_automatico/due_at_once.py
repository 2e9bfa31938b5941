#!/usr/bin/env python3
"""N recurring charges of one account due at the same instant (issue 26).

With ON_US=1 the payer of every recurrence is a second account of this gateway (PAYER, its
`pixgw account create` files): it approves each one through its own API, and each charge
is a debit of that account and an on-us credit of the Demo account, two actors per charge.

Makes N approved recurrences on the Demo account, one charge each, all due on the same day;
then moves the test clock to 2 s before that day's 00:00 (São Paulo) and lets the account's
timer fire on its own, as in production. It times how long the charges take to settle, and
meanwhile a second connection times GET /api/balance, which goes through the same account
actor: its slowest answer is the longest the actor kept its mailbox waiting. At the end
every charge must be CONCLUIDA and the balance up by N times the value.

Run by benches/pix_automatico/due_at_once.sh (which starts the server).
"""
import datetime
import http.client
import json
import os
import sys
import threading
import time

PORT = int(os.environ["PORT"])
DEMO = os.environ["DEMO"]
N = int(os.environ.get("N", "2000"))
ON_US = os.environ.get("ON_US") == "1"
PAYER = os.environ.get("PAYER")


def conn():
    return http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)


def call(c, method, path, token=None, body=None, headers=None):
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(headers or {})
    c.request(method, path, body=None if body is None else json.dumps(body), headers=h)
    r = c.getresponse()
    data = r.read()
    return r.status, (json.loads(data) if data else None)


def token(c, home=DEMO):
    cert = open(os.path.join(home, "client-cert.urlencoded")).read().strip()
    req = json.load(open(os.path.join(home, "token-request.json")))
    s, b = call(c, "POST", "/api/auth/token", body=req, headers={"X-SSL-Client-Cert": cert})
    assert s == 201, b
    return b["access_token"]


def window_of(now):
    return (f"inicio={(now - datetime.timedelta(days=5)).strftime('%Y-%m-%dT%H:%M:%SZ')}"
            f"&fim={(now + datetime.timedelta(minutes=1)).strftime('%Y-%m-%dT%H:%M:%SZ')}")


def main():
    admin = json.load(open(os.path.join(DEMO, "credentials.json")))["adminToken"]
    c = conn()
    t = token(c)
    sp_today = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=3)).date()
    due = sp_today + datetime.timedelta(days=2)
    start = (sp_today + datetime.timedelta(days=1)).isoformat()
    expires = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=6)).isoformat()
    if ON_US:
        pt = token(c, PAYER)
        s, me = call(c, "GET", "/api/account", pt)
        assert s == 200, me
        recipient = {"cpf": "52998224725", "conta": str(me["accountId"]), "ispbParticipante": "99999999"}
        s, payer_before = call(c, "GET", "/api/balance", pt)
    else:
        recipient = {"cpf": "11144477735", "conta": "1", "ispbParticipante": "00000000"}
    made = time.time()
    for i in range(N):
        s, r = call(c, "POST", "/rec", t, {
            "vinculo": {"contrato": f"c-{i}", "devedor": {"cpf": "52998224725", "nome": "Ana"}},
            "calendario": {"dataInicial": start, "periodicidade": "MENSAL"},
            "valor": {"valorRec": "10.00"}, "politicaRetentativa": "NAO_PERMITE"})
        assert s == 201, r
        s, sol = call(c, "POST", "/solicrec", t, {
            "idRec": r["idRec"], "calendario": {"dataExpiracaoSolicitacao": expires},
            "destinatario": recipient})
        assert s == 201, sol
        if ON_US:
            s, a = call(c, "POST", f"/api/automatic-pix/recurrences/{r['idRec']}/answer", pt, {"decision": "APPROVE"})
        else:
            s, a = call(c, "POST", f"/sandbox/solicrec/{sol['idSolicRec']}/answer", t, {"decision": "APPROVE"})
        assert s == 200, a
        s, ch = call(c, "PUT", f"/cobr/due{i:026d}", t, {
            "idRec": r["idRec"], "calendario": {"dataDeVencimento": due.isoformat()},
            "valor": {"original": "10.00"}, "ajusteDiaUtil": False})
        assert s == 201, ch
    print(f"made {N} approved recurrences with a charge each in {time.time() - made:.1f} s")
    s, before = call(c, "GET", "/api/balance", t)
    s, ativa = call(c, "GET", "/cobr?" + window_of(datetime.datetime.now(datetime.timezone.utc)) + "&status=ATIVA&paginacao.itensPorPagina=1", t)
    assert ativa["parametros"]["paginacao"]["quantidadeTotalDeItens"] == N, ativa
    midnight = datetime.datetime.combine(due, datetime.time(3, 0, 0), datetime.timezone.utc)
    # The clock goes to 2 s before the charges' midnight; the account's timer then fires on
    # its own, as it would in production, and does the charges in turns.
    seconds = int((midnight - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) - 2

    probes = []
    stop = threading.Event()

    def probe():
        p = conn()
        pt = token(p)
        while not stop.is_set():
            t0 = time.time()
            s, _ = call(p, "GET", "/api/balance", pt)
            if s == 401:
                # The clock moved past the token's life: a new one, valid at the new time.
                pt = token(p)
                continue
            probes.append((t0, time.time() - t0, s))

    s, b = call(c, "POST", "/admin/clock", admin, {"advanceSeconds": seconds})
    assert s == 200, b
    th = threading.Thread(target=probe)
    th.start()
    t = token(c)
    moved = time.time()
    now = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds + 5)
    first = last = None
    # Done is read off the balance, which every settlement moves and which its actor answers
    # cheaply; `GET /cobr` decodes every charge of the account to count them, and polled
    # every 10 ms it took more of the server than the settling it measured (docs/benchmarks.md
    # "Pix Automático to the API Pix").
    target = before["netBalance"] + 10 * N
    while time.time() - moved < 120:
        s, bal = call(c, "GET", "/api/balance", t)
        if s == 401:
            t = token(c)
            continue
        if bal["netBalance"] > before["netBalance"] and first is None:
            first = time.time()
        if abs(bal["netBalance"] - target) < 0.005:
            last = time.time()
            break
        time.sleep(0.01)
    stop.set()
    th.join()
    s, done = call(c, "GET", f"/cobr?{window_of(now)}&status=CONCLUIDA&paginacao.itensPorPagina=1", t)
    settled = done["parametros"]["paginacao"]["quantidadeTotalDeItens"]
    # The turns begin a little before the first settled charge can be seen.
    t0, took = (first or moved) - 0.05, (last or time.time()) - (first or moved) + 0.05
    t = token(c)
    s, after = call(c, "GET", "/api/balance", t)
    # Only the reads made while the charges settled.
    inside = [(start, d) for start, d, st in probes if st == 200 and t0 <= start + d and start <= t0 + took]
    lat = sorted(d for _, d in inside)
    worst = lat[-1] if lat else 0
    p99 = lat[int(len(lat) * 0.99)] if lat else 0
    print(f"{N} charges due at once: all CONCLUIDA {took:.2f} s after the first "
          f"(about {N / max(took, 1e-3):.0f} settlements/s, to within the 10 ms poll); {settled} CONCLUIDA")
    print(f"balance reads while the charges settled: {len(lat)}, p99 {p99 * 1000:.1f} ms, slowest {worst * 1000:.1f} ms")
    if inside:
        at, d = max(inside, key=lambda x: x[1])
        print(f"the slowest read began {at - t0:+.3f} s after the settling began ({took:.2f} s long)")
    print(f"net balance {before['netBalance']} -> {after['netBalance']}")
    ok = settled == N and abs(after["netBalance"] - before["netBalance"] - 10 * N) < 0.005
    if ON_US:
        pt = token(c, PAYER)
        s, payer_after = call(c, "GET", "/api/balance", pt)
        spent = payer_before["netBalance"] - payer_after["netBalance"]
        print(f"payer's net balance {payer_before['netBalance']} -> {payer_after['netBalance']} (spent {spent:.2f})")
        ok = ok and spent >= 10 * N - 0.005
    print("check:", "every charge settled once" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


main()
