/// The live page: one self-contained HTML document (CSS and plain JavaScript inline, no CDN, no
/// build step) that opens `/events` with `EventSource`, keeps at most `capacity` flows, and offers
/// filters, pause/clear, a detail pane, the live minimal dictionary and the downloads.
///
/// Below 1,000 px (a window beside the Simulator) the list keeps time, method, URL, status, outcome and code and
/// the detail pane moves below it; the optional columns can be hidden; the filters and hidden columns live in the
/// URL's query (`?outcome=blocked&host=api&hide=source,ms`), so a view can be reloaded or shared.
///
/// Hooks for tests and scripts: `window.atsProxy` (`connected`, `flows`, `select(id)`), rows carry
/// `data-id`, `data-outcome`, `data-code`, `data-host` (and `data-h3` when the origin offered HTTP/3); the
/// detail pane's parts have ids (`d-rule`, `d-fix`, `d-chain`, `d-tls`, `d-console`, `d-timings`, `d-http3`,
/// `d-curl`).
enum WebPage {
    /// The page with `title` (HTML-escaped), the ring's capacity, and the proxy address "copy as curl" names
    /// (`host:port` as this page's client reaches the proxy; nil: a placeholder) filled in.
    static func html(title: String, capacity: Int, proxy: String? = nil) -> String {
        template.replacingOccurrences(of: "{{TITLE}}", with: escape(title))
            .replacingOccurrences(of: "{{CAPACITY}}", with: "\(capacity)")
            .replacingOccurrences(of: "{{PROXY}}", with: jsString(proxy ?? "PROXY_HOST:PORT"))
    }

    /// `text` as a JavaScript string literal (JSON string syntax, with `<` escaped so it cannot end the script).
    static func jsString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "<": out += "\\u003c"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// Escapes `&`, `<`, `>` and `"` for HTML text and attribute values.
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static let template = #"""
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>ats-proxy: live flows</title>
        <style>
        :root{--bg:#fff;--fg:#1d1d1f;--mute:#6e6e73;--line:#e5e5ea;--panel:#f5f5f7;--sel:#dbeafe;
        --allowed:#1a7f37;--blocked:#cf222e;--failed:#9a6700;--reported:#8250df;--ignored:#57606a;--finding:#a40e26}
        @media (prefers-color-scheme:dark){:root{--bg:#111;--fg:#f5f5f7;--mute:#a1a1a6;--line:#2c2c2e;--panel:#1c1c1e;--sel:#1e3a5f;
        --allowed:#3fb950;--blocked:#ff6b6b;--failed:#d29922;--reported:#bc8cff;--ignored:#8b949e;--finding:#ff8182}}
        *{box-sizing:border-box}body{margin:0;font:13px/1.4 -apple-system,system-ui,sans-serif;background:var(--bg);color:var(--fg)}
        header{display:flex;flex-wrap:wrap;gap:.4rem 1rem;align-items:baseline;padding:.5rem .8rem;border-bottom:1px solid var(--line)}
        header h1{font-size:1rem;margin:0}header .title{color:var(--mute)}header .dl{margin-left:auto}
        header .dl a{margin-left:.6rem;color:inherit}#state{font-weight:600}
        #state.on{color:var(--allowed)}#state.off{color:var(--blocked)}
        .filters{display:flex;flex-wrap:wrap;gap:.4rem;padding:.5rem .8rem;border-bottom:1px solid var(--line);background:var(--panel)}
        .filters input,.filters select,.filters button{font:inherit;padding:.2rem .4rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg)}
        .filters input[type=search]{width:9rem}.filters label{white-space:nowrap}
        main{display:grid;grid-template-columns:minmax(0,3fr) minmax(18rem,2fr);height:calc(100vh - 5.6rem)}
        .left{display:flex;flex-direction:column;min-height:0;border-right:1px solid var(--line)}
        .list{overflow:auto;flex:1 1 auto;min-height:0}
        .dict{flex:0 0 auto;max-height:38%;overflow:auto;border-top:1px solid var(--line);padding:.4rem .8rem}
        .dict h2{font-size:.95rem;margin:.2rem 0 .3rem}
        table{border-collapse:collapse;width:100%}th,td{padding:.2rem .4rem;text-align:left;white-space:nowrap;border-bottom:1px solid var(--line)}
        th{position:sticky;top:0;background:var(--panel);font-weight:600;z-index:1}
        td.url{max-width:24rem;overflow:hidden;text-overflow:ellipsis}td.num{text-align:right;font-variant-numeric:tabular-nums}
        tr.flow{cursor:pointer}tr.flow:hover{background:var(--panel)}tr.flow.sel{background:var(--sel)}
        tr.flow td:first-child{border-left:4px solid var(--c)}
        .o-allowed{--c:var(--allowed)}.o-allowed-by-exception{--c:var(--allowed)}.o-blocked{--c:var(--blocked)}.o-failed{--c:var(--blocked)}.o-network-error{--c:var(--failed)}.o-reported{--c:var(--reported)}.o-passthrough{--c:var(--ignored)}.o-ignored{--c:var(--ignored)}.o-challenge-passed{--c:var(--allowed)}.o-challenge-finding{--c:var(--finding)}
        .badge{color:var(--c);font-weight:600}
        aside{overflow:auto;padding:.6rem .8rem}aside h2{font-size:.95rem;margin:.9rem 0 .3rem}aside h2:first-child{margin-top:0}
        pre{tab-size:4;font:12px/1.35 ui-monospace,Menlo,monospace;background:var(--panel);padding:.5rem;border-radius:6px;white-space:pre-wrap;word-break:break-all;margin:0}
        dl{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .6rem;margin:0}dt{color:var(--mute)}dd{margin:0;word-break:break-all;white-space:pre-line}
        .fix{border-left:4px solid var(--allowed);padding:.3rem .5rem;background:var(--panel)}.rule{border-left:4px solid var(--c,var(--line));padding:.3rem .5rem;background:var(--panel)}
        .muted{color:var(--mute)}button.copy{float:right;font:inherit}
        .cols{position:relative}.cols summary{cursor:pointer;list-style:none;padding:.2rem .4rem;border:1px solid var(--line);border-radius:6px;background:var(--bg)}
        .cols div{position:absolute;z-index:2;background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:.3rem .5rem;display:grid;gap:.1rem}
        @media (min-width:1001px){td.url{max-width:0;width:100%;min-width:14rem}}
        @media (max-width:1000px){main{display:flex;flex-direction:column;height:auto}.left{display:contents}
        .list{order:1;max-height:55vh;border-bottom:1px solid var(--line)}aside{order:2;border-bottom:1px solid var(--line)}.dict{order:3;max-height:none}
        td.url{max-width:22rem}.wide{display:none}header .dl{margin-left:0}}
        @media (max-width:760px){td.url{max-width:9rem}th,td{padding:.2rem .25rem}}
        </style></head><body>
        <header><h1>ats-proxy</h1><span class="title">{{TITLE}}</span><span id="state" class="off">connecting…</span>
        <span id="counts" class="muted"></span>
        <span class="dl"><a href="/session.har" download>HAR</a><a href="/report.json" download>report.json</a><a href="/report.html" download>report.html</a><a href="/ats-proxy-ca.pem" download>CA</a></span></header>
        <div class="filters">
        <input type="search" id="f-host" placeholder="host" aria-label="host">
        <select id="f-outcome" aria-label="outcome"><option value="">any outcome</option><option>allowed</option><option>allowed by exception</option><option>blocked</option><option>failed</option><option>network error</option><option>reported</option><option>passthrough</option><option>ignored</option><option>challenge passed</option><option>challenge finding</option></select>
        <input type="search" id="f-code" placeholder="code (-1022)" aria-label="code">
        <select id="f-source" aria-label="source"><option value="">any source</option><option value="urlsession">URLSession</option><option value="webkit">WebKit</option><option value="media">media</option></select>
        <input type="search" id="f-text" placeholder="text" aria-label="free text">
        <label><input type="checkbox" id="f-violations"> violations only</label>
        <details class="cols"><summary>Columns</summary><div>
        <label><input type="checkbox" data-col="source" checked> source</label><label><input type="checkbox" data-col="protocol" checked> protocol</label>
        <label><input type="checkbox" data-col="status" checked> status</label><label><input type="checkbox" data-col="ms" checked> ms</label>
        <label><input type="checkbox" data-col="up" checked> up</label><label><input type="checkbox" data-col="down" checked> down</label></div></details>
        <button id="pause" type="button">Pause</button><button id="clear" type="button">Clear</button>
        </div><style id="colstyle"></style>
        <main><div class="left"><div class="list"><table><thead><tr><th>time</th><th class="wide c-source">source</th><th>method</th><th>URL</th><th class="c-status">status</th><th>outcome</th><th>code</th><th class="wide c-protocol">protocol</th><th class="wide c-ms">ms</th><th class="wide c-up">up</th><th class="wide c-down">down</th></tr></thead>
        <tbody id="rows"></tbody></table></div>
        <section class="dict"><h2>Minimal NSAppTransportSecurity for this session <button class="copy" id="copy" type="button">Copy</button> <button class="copy" id="verify" type="button" title="Re-decide every load of this session under this dictionary (TLS failures are checked against the server again)">Verify</button></h2>
        <pre id="dictionary" class="muted">waiting for traffic…</pre><pre id="verified" hidden></pre></section></div>
        <aside><div id="detail"><p class="muted">Select a request to see its headers, the ATS rule that decided it, the Info.plist fix, TLS facts and console lines.</p></div></aside></main>
        <script>
        "use strict";
        (function(){
        const capacity={{CAPACITY}};const proxyAddress={{PROXY}};
        const flows=new Map();const rows=document.getElementById("rows");const detail=document.getElementById("detail");
        const state=document.getElementById("state");const counts=document.getElementById("counts");
        const f={host:document.getElementById("f-host"),outcome:document.getElementById("f-outcome"),code:document.getElementById("f-code"),
        source:document.getElementById("f-source"),text:document.getElementById("f-text"),violations:document.getElementById("f-violations")};
        let paused=false,held=[],selected=null,clearedThrough=0,skipped=0;
        const api={connected:false,flows:flows,select:select,applyFilters:applyFilters};window.atsProxy=api;
        function el(tag,cls,text){const e=document.createElement(tag);if(cls)e.className=cls;if(text!==undefined&&text!==null)e.textContent=String(text);return e;}
        function fmtTime(iso){const d=new Date(iso);return d.toLocaleTimeString([], {hour12:false})+"."+String(d.getMilliseconds()).padStart(3,"0");}
        function fmtBytes(n){return n<1024?n+" B":n<1048576?(n/1024).toFixed(1)+" KB":(n/1048576).toFixed(1)+" MB";}
        function isViolation(o){return o.violation;}
        function slug(w){return w.replace(/ /g,"-");}
        function matches(o){
        const host=f.host.value.trim().toLowerCase();if(host&&!o.host.toLowerCase().includes(host))return false;
        if(f.outcome.value&&o.outcome!==f.outcome.value)return false;
        const code=f.code.value.trim();if(code&&!(o.code||"").includes(code))return false;
        if(f.source.value&&o.source!==f.source.value)return false;
        if(f.violations.checked&&!isViolation(o))return false;
        const text=f.text.value.trim().toLowerCase();
        if(text){const hay=[o.url,o.method,o.rule,o.fix||"",o.code||"",o.outcome,String(o.status||""),o.ruleChain.join(" ")].join(" ").toLowerCase();if(!hay.includes(text))return false;}
        return true;}
        function row(o){
        const tr=el("tr","flow o-"+slug(o.outcome));tr.dataset.id=o.id;tr.dataset.outcome=o.outcome;tr.dataset.violation=o.violation?"1":"";tr.dataset.code=o.code||"";tr.dataset.host=o.host;if(o.http3)tr.dataset.h3="offered";
        tr.append(el("td","",fmtTime(o.time)),el("td","wide c-source",o.source),el("td","",o.method));
        const u=el("td","url",o.url);u.title=o.url;tr.append(u);
        tr.append(el("td","num c-status",o.status||"—"),el("td","badge",o.outcome),el("td","",o.code||""),el("td","wide c-protocol",o.proto+(o.route&&o.route!=="absolute-form"&&o.route!=="CONNECT+TLS"?" · "+o.route:"")),
        el("td","num wide c-ms",o.ms),el("td","num wide c-up",fmtBytes(o.up)),el("td","num wide c-down",fmtBytes(o.down)));
        tr.hidden=!matches(o);tr.addEventListener("click",()=>select(o.id));return tr;}
        function add(o){
        if(o.id<=clearedThrough||flows.has(o.id))return;
        flows.set(o.id,o);rows.append(row(o));
        while(flows.size>capacity){const first=flows.keys().next().value;flows.delete(first);const r=rows.firstElementChild;if(r)r.remove();}}
        function updateCounts(){let shown=0,v=0,cf=0;for(const r of rows.children){if(!r.hidden)shown++;if(r.dataset.violation)v++;if(r.dataset.outcome==="challenge finding")cf++;}
        counts.textContent=flows.size+" flows, "+v+" violations, "+(cf?cf+" forged servers accepted (challenge findings), ":"")+shown+" shown"+(paused?" (paused, "+held.length+" waiting)":"")+
        (skipped?"; "+skipped+" not shown while the proxy was busy (they are in the HAR)":"");}
        function applyFilters(){for(const r of rows.children){const o=flows.get(Number(r.dataset.id));r.hidden=!o||!matches(o);}updateCounts();syncURL();}
        const colBoxes=[...document.querySelectorAll(".cols input[data-col]")];
        function hiddenCols(){return colBoxes.filter(b=>!b.checked).map(b=>b.dataset.col);}
        function applyCols(){document.getElementById("colstyle").textContent=hiddenCols().map(c=>".c-"+c+"{display:none!important}").join("");syncURL();}
        function syncURL(){const q=new URLSearchParams();
        for(const k of ["host","outcome","code","source","text"]){const v=f[k].value.trim();if(v)q.set(k,v);}
        if(f.violations.checked)q.set("violations","1");const h=hiddenCols();if(h.length)q.set("hide",h.join(","));
        const s=q.toString();history.replaceState(null,"",location.pathname+(s?"?"+s:""));}
        function readURL(){const q=new URLSearchParams(location.search);
        for(const k of ["host","outcome","code","source","text"]){if(q.has(k))f[k].value=q.get(k);}
        f.violations.checked=q.get("violations")==="1";const h=(q.get("hide")||"").split(",");
        for(const b of colBoxes)b.checked=!h.includes(b.dataset.col);
        document.getElementById("colstyle").textContent=hiddenCols().map(c=>".c-"+c+"{display:none!important}").join("");}
        function shellQuote(t){return "'"+String(t).replace(/'/g,"'\\''")+"'";}
        const skipHeaders=new Set(["host","content-length","connection","proxy-connection","proxy-authorization","keep-alive","te","transfer-encoding","upgrade"]);
        function curlCommand(o){
        if(o.method==="CONNECT")return "(a tunnel that carried no request: no curl command repeats it)";
        const parts=["curl","-x",shellQuote("http://"+proxyAddress)];
        if(o.requestHeaders.some(h=>h[0].toLowerCase()==="proxy-authorization"))parts.push("--proxy-user","'USER:PASSWORD'");
        if(o.url.startsWith("https:"))parts.push("--cacert","ats-proxy-ca.pem");
        if(o.method==="HEAD")parts.push("-I");else if(o.method!=="GET")parts.push("-X",shellQuote(o.method));
        for(const h of o.requestHeaders){if(skipHeaders.has(h[0].toLowerCase())||String(h[1]).startsWith("<redacted"))continue;parts.push("-H",shellQuote(h[0]+": "+h[1]));}
        parts.push(shellQuote(o.url));return parts.join(" ");}
        function section(title,body){const h=el("h2","",title);detail.append(h);if(body)detail.append(body);}
        function kv(pairs){const d=el("dl");for(const [k,v] of pairs){d.append(el("dt","",k),el("dd","",v));}return d;}
        function headers(list){return el("pre","",list.length?list.map(h=>h[0]+": "+h[1]).join("\n"):"(none)");}
        function select(id){
        const o=flows.get(Number(id));if(!o)return false;selected=o.id;
        for(const r of rows.querySelectorAll("tr.sel"))r.classList.remove("sel");
        const r=rows.querySelector('tr[data-id="'+o.id+'"]');if(r)r.classList.add("sel");
        detail.textContent="";detail.className="o-"+slug(o.outcome);
        const t=el("h2","",o.method+" "+o.url);t.style.wordBreak="break-all";detail.append(t);
        detail.append(kv([["outcome",o.outcome+(o.code?" ("+o.code+")":"")],["status",o.status||"no response"],["protocol",o.proto],["route",o.route||"—"],["source",o.source],["client",o.client],["task",o.task],["ATS in force",o.atsRequired?"yes":"no"]]));
        const rule=el("div","rule",o.rule);rule.id="d-rule";section(o.outcome.startsWith("challenge ")?"Challenge (--challenge)":o.outcome.startsWith("allowed")||o.outcome==="passthrough"?"Decision":"Failing requirement",rule);
        const chain=el("pre","",o.ruleChain.length?o.ruleChain.map((k,i)=>(i?"↳ ":"")+k).join("\n"):"(no rule chain)");chain.id="d-chain";section("Rule chain (most specific first)",chain);
        if(o.fix){const fx=el("div","fix",o.fix);fx.id="d-fix";section("Smallest Info.plist fix",fx);}
        const tls=o.tls?kv(Object.keys(o.tls).sort().map(k=>[k,o.tls[k]])):el("p","muted","no upstream TLS handshake");tls.id="d-tls";section("TLS",tls);
        const ph=o.timings||{},tl=[];const at=(v)=>v===undefined||v===null?null:v;
        if(at(ph.connectStart)!==null)tl.push(["upstream asked for",ph.connectStart+" ms"]);
        if(at(ph.connected)!==null)tl.push(["connected (TCP)",ph.connected+" ms"]);
        if(at(ph.secured)!==null)tl.push(["TLS done",ph.secured+" ms"]);
        if(at(ph.firstByte)!==null)tl.push(["first byte",ph.firstByte+" ms"]);
        if(o.timings&&at(ph.connectStart)===null&&o.outcome!=="blocked")tl.push(["upstream","reused connection"]);
        const tm=kv(tl.concat([["total",o.ms+" ms"],["started",o.time]]));tm.id="d-timings";section("Timings",tm);
        const con=el("pre","",o.console.length?o.console.join("\n"):"(none at this level)");con.id="d-console";section("Console (as the device logs it)",con);
        section("Request headers",headers(o.requestHeaders));section("Response headers",headers(o.responseHeaders));
        if(o.http3){const h3=el("div","rule","Alt-Svc "+o.http3.offer+": "+o.http3.note);h3.id="d-http3";section("HTTP/3 offered",h3);}
        if(o.retried)section("Note",el("p","","sent again on a new connection (the reused one closed first)"));
        const curl=el("pre","",curlCommand(o));curl.id="d-curl";const cb=el("button","copy","Copy");cb.type="button";
        cb.addEventListener("click",()=>{if(navigator.clipboard)navigator.clipboard.writeText(curl.textContent);});
        const ch=el("h2","","Copy as curl (through the proxy; secret headers left out) ");ch.append(cb);detail.append(ch,curl);
        if(matchMedia("(max-width:1000px)").matches)detail.scrollIntoView({block:"start"});
        return true;}
        function receive(o){if(paused){held.push(o);}else{add(o);}}
        let pending=false;function scheduleCounts(){if(pending)return;pending=true;requestAnimationFrame(()=>{pending=false;updateCounts();});}
        function connect(){
        const es=new EventSource("/events");
        es.addEventListener("open",()=>{api.connected=true;state.textContent="live";state.className="on";});
        es.addEventListener("error",()=>{api.connected=false;state.textContent="reconnecting…";state.className="off";});
        es.addEventListener("message",(e)=>{receive(JSON.parse(e.data));scheduleCounts();});
        es.addEventListener("skipped",(e)=>{skipped+=JSON.parse(e.data).count;scheduleCounts();});
        es.addEventListener("dictionary",(e)=>{const d=JSON.parse(e.data);const p=document.getElementById("dictionary");p.textContent=d.plist;p.className="";});}
        for(const k of ["host","code","text"])f[k].addEventListener("input",applyFilters);
        for(const k of ["outcome","source","violations"])f[k].addEventListener("change",applyFilters);
        for(const b of colBoxes)b.addEventListener("change",applyCols);readURL();
        document.getElementById("pause").addEventListener("click",(e)=>{paused=!paused;e.target.textContent=paused?"Resume":"Pause";
        if(!paused){for(const o of held)add(o);held=[];}updateCounts();});
        document.getElementById("clear").addEventListener("click",()=>{let max=clearedThrough;for(const id of flows.keys())max=Math.max(max,id);for(const o of held)max=Math.max(max,o.id);
        clearedThrough=max;flows.clear();held=[];rows.textContent="";selected=null;updateCounts();});
        document.getElementById("copy").addEventListener("click",()=>{const t=document.getElementById("dictionary").textContent;
        if(navigator.clipboard)navigator.clipboard.writeText(t);else{const r=document.createRange();r.selectNodeContents(document.getElementById("dictionary"));const s=getSelection();s.removeAllRanges();s.addRange(r);}});
        document.getElementById("verify").addEventListener("click",(e)=>{const out=document.getElementById("verified");const button=e.target;
        if(button.disabled)return;button.disabled=true;out.hidden=false;out.textContent="verifying…";
        fetch("/api/verify",{method:"POST",headers:{"X-ATS-Proxy-Action":"verify"}}).then(r=>r.json()).finally(()=>{button.disabled=false;}).then(v=>{if(v.error){out.textContent=v.error;return;}
        out.textContent=v.loads.map(l=>(l.result==="pass"?"PASS ":l.result==="fail"?"FAIL ":"SKIP ")+l.url+(l.code?" "+l.code:"")+": "+l.reason).join("\n")+
        "\n"+v.passed+" pass, "+v.failed+" still fail, "+v.skipped+" not decided by Info.plist";out.dataset.failed=String(v.failed);})
        .catch(e=>{out.textContent="verify failed: "+e;});});
        connect();updateCounts();
        })();
        </script>
        </body></html>

        """#
}
