// /docs: the API reference, rendered in the browser from /openapi.json by a small inline script
// (nothing is loaded from elsewhere: the machine may have no way out).

const css = `
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1b1f24;display:flex}
nav{width:15rem;flex:none;height:100vh;overflow:auto;position:sticky;top:0;border-right:1px solid #e3e6ea;padding:1rem;background:#f6f8fa}
nav a{display:block;color:#1b1f24;text-decoration:none;padding:.1rem 0}nav a:hover{color:#0969da}
main{flex:1;padding:1rem 2rem;max-width:64rem}h1{font-size:1.3rem}h2{margin-top:2rem;border-bottom:1px solid #e3e6ea;padding-bottom:.2rem}
.op{border:1px solid #e3e6ea;border-radius:8px;margin:.7rem 0}.op>summary{cursor:pointer;padding:.5rem .7rem;list-style:none;display:flex;gap:.6rem;align-items:center}
.m{font:600 .75rem monospace;border-radius:4px;padding:.15rem .45rem;color:#fff;min-width:4rem;text-align:center}
.get{background:#0969da}.post{background:#1a7f37}.delete{background:#cf222e}.put,.patch{background:#9a6700}
.path{font-family:monospace}.sum{color:#6a737d}.body{padding:.2rem 1rem 1rem}table{border-collapse:collapse;width:100%;margin:.4rem 0}
th,td{text-align:left;border-bottom:1px solid #e3e6ea;padding:.25rem .4rem;vertical-align:top;font-size:.85rem}
pre{background:#f6f8fa;padding:.6rem;border-radius:6px;overflow:auto;font-size:.8rem;max-height:24rem}.lock{font-size:.8rem;color:#6a737d}
`;

const script = `
(function(){
  function el(tag,attrs,children){var e=document.createElement(tag);for(var k in attrs||{}){if(k==='text')e.textContent=attrs[k];else e.setAttribute(k,attrs[k])}(children||[]).forEach(function(c){if(c)e.appendChild(c)});return e}
  function schemaBlock(title,schema){if(!schema)return null;var d=el('details',{},[el('summary',{text:title}),el('pre',{text:JSON.stringify(schema,null,2)})]);return d}
  function resolve(doc,s){if(s&&s.$ref){var name=s.$ref.split('/').pop();return {name:name,schema:doc.components.schemas[name]}}return {name:null,schema:s}}
  fetch('/openapi.json').then(function(r){return r.json()}).then(function(doc){
    var main=document.getElementById('main'),nav=document.getElementById('nav');
    main.appendChild(el('h1',{text:doc.info.title+' · '+doc.info.version}));
    main.appendChild(el('p',{text:doc.info.description}));
    var byTag={};
    Object.keys(doc.paths).forEach(function(p){Object.keys(doc.paths[p]).forEach(function(m){var op=doc.paths[p][m];var t=(op.tags||['other'])[0];(byTag[t]=byTag[t]||[]).push({path:p,method:m,op:op})})});
    Object.keys(byTag).sort().forEach(function(tag){
      nav.appendChild(el('a',{href:'#tag-'+tag,text:tag}));
      main.appendChild(el('h2',{id:'tag-'+tag,text:tag}));
      byTag[tag].forEach(function(x){
        var op=x.op,body=el('div',{'class':'body'});
        if(op.description)body.appendChild(el('p',{text:op.description}));
        var sec=(op.security||[]).map(function(s){return Object.keys(s).join(' + ')}).join('  or  ');
        body.appendChild(el('div',{'class':'lock',text:sec?'Credentials: '+sec:'No credentials needed'}));
        if(op.parameters&&op.parameters.length){
          var rows=op.parameters.map(function(p){return el('tr',{},[el('td',{},[el('code',{text:p.name})]),el('td',{text:p.in}),el('td',{text:p.required?'required':''}),el('td',{text:(p.description||'')+(p.schema&&p.schema.default!==undefined?' (default '+p.schema.default+')':'')})])});
          body.appendChild(el('table',{},[el('tr',{},['name','in','','meaning'].map(function(h){return el('th',{text:h})}))].concat(rows)));
        }
        if(op.requestBody){var c=op.requestBody.content,ct=Object.keys(c)[0];var rb=resolve(doc,c[ct].schema);body.appendChild(schemaBlock('Request body ('+ct+')'+(rb.name?' · '+rb.name:''),rb.schema))}
        Object.keys(op.responses||{}).forEach(function(st){var r=op.responses[st],c=r.content||{},ct=Object.keys(c)[0];var s=ct&&c[ct].schema?resolve(doc,c[ct].schema):{};
          body.appendChild(s.schema?schemaBlock(st+' '+r.description+(s.name?' · '+s.name:''),s.schema):el('div',{text:st+' '+r.description}))});
        main.appendChild(el('details',{'class':'op'},[el('summary',{},[el('span',{'class':'m '+x.method,text:x.method.toUpperCase()}),el('span',{'class':'path',text:x.path}),el('span',{'class':'sum',text:op.summary})]),body]));
      });
    });
  }).catch(function(e){document.getElementById('main').textContent='Could not load /openapi.json: '+e.message});
})();
`;

export function docsPage(): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Mirror API reference</title><style>${css}</style></head><body><nav id="nav"><b>Sections</b></nav><main id="main"></main><script>${script}</script></body></html>`;
}
