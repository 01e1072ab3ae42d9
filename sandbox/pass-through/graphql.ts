// The GraphQL pass-through of the GraphQL accounting system: a small query-only subset (root
// fields with arguments and nested selections, variables), enough for real client queries.
import { asText } from '../data/as-text.ts';
import { z } from 'zod';
import type { LinkedAccount } from '../auth-and-link/accounts.ts';
import type { SandboxContext } from '../context.ts';
import { isTopLevel, type TopLevelResource } from '../data/catalog.ts';
import type { Fields } from '../data/generators.ts';
import { nativeName, rawObject } from '../data/raw-source.ts';
import type { SourceAnswer } from './sql.ts';

export const graphqlSchema = z.object({ query: z.string().min(1), variables: z.record(z.string(), z.unknown()).default({}) });
type GraphqlRequest = z.infer<typeof graphqlSchema>;

interface Field {
  alias: string;
  name: string;
  args: Record<string, unknown>;
  selections: Field[] | null;
}

type Token = { t: 'name' | 'punct' | 'string' | 'number' | 'var'; v: string };

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  const re = /\s+|,|#[^\n]*|"((?:[^"\\]|\\.)*)"|(-?\d+(?:\.\d+)?)|\$([_A-Za-z]\w*)|([_A-Za-z]\w*)|([{}():!=[\]@])|(.)/gy;
  let m: RegExpExecArray | null;
  while ((m = re.exec(src)) && m[0] !== '') {
    if (m[1] !== undefined) out.push({ t: 'string', v: JSON.parse(`"${m[1]}"`) as string });
    else if (m[2] !== undefined) out.push({ t: 'number', v: m[2] });
    else if (m[3] !== undefined) out.push({ t: 'var', v: m[3] });
    else if (m[4] !== undefined) out.push({ t: 'name', v: m[4] });
    else if (m[5] !== undefined) out.push({ t: 'punct', v: m[5] });
    else if (m[6] !== undefined) throw new Error(`Syntax Error: unexpected character "${m[6]}"`);
  }
  return out;
}

class Parser {
  private i = 0;
  constructor(
    private readonly tokens: Token[],
    private readonly variables: Record<string, unknown>,
  ) {}

  private peek(): Token | undefined {
    return this.tokens[this.i];
  }
  private next(): Token {
    const t = this.tokens[this.i++];
    if (!t) throw new Error('Syntax Error: unexpected end of query');
    return t;
  }
  private expect(v: string): void {
    const t = this.next();
    if (t.v !== v) throw new Error(`Syntax Error: expected "${v}", found "${t.v}"`);
  }

  document(): { operation: string; selections: Field[] } {
    let operation = 'query';
    const first = this.peek();
    if (first?.t === 'name') {
      operation = this.next().v;
      if (this.peek()?.t === 'name') this.next();
      if (this.peek()?.v === '(') {
        // Variable definitions: their types do not matter here.
        let depth = 0;
        do {
          const t = this.next();
          if (t.v === '(') depth++;
          if (t.v === ')') depth--;
        } while (depth > 0);
      }
    }
    return { operation, selections: this.selectionSet() };
  }

  private selectionSet(): Field[] {
    this.expect('{');
    const fields: Field[] = [];
    while (this.peek()?.v !== '}') fields.push(this.field());
    this.expect('}');
    return fields;
  }

  private field(): Field {
    let name = this.next();
    if (name.t !== 'name') throw new Error(`Syntax Error: expected a field name, found "${name.v}"`);
    let alias = name.v;
    if (this.peek()?.v === ':') {
      this.next();
      name = this.next();
    }
    const args: Record<string, unknown> = {};
    if (this.peek()?.v === '(') {
      this.next();
      while (this.peek()?.v !== ')') {
        const key = this.next().v;
        this.expect(':');
        args[key] = this.value();
      }
      this.expect(')');
    }
    const selections = this.peek()?.v === '{' ? this.selectionSet() : null;
    if (alias === name.v) alias = name.v;
    return { alias, name: name.v, args, selections };
  }

  private value(): unknown {
    const t = this.next();
    if (t.t === 'var') return this.variables[t.v];
    if (t.t === 'number') return Number(t.v);
    if (t.t === 'string') return t.v;
    if (t.v === 'true') return true;
    if (t.v === 'false') return false;
    if (t.v === 'null') return null;
    if (t.v === '[') {
      const list: unknown[] = [];
      while (this.peek()?.v !== ']') list.push(this.value());
      this.next();
      return list;
    }
    return t.v;
  }
}

function project(value: unknown, selections: Field[] | null): unknown {
  if (!selections || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => project(v, selections));
  const obj = value as Fields;
  const out: Fields = {};
  for (const s of selections) out[s.alias] = project(obj[s.name] ?? null, s.selections);
  return out;
}

export function runGraphql(ctx: SandboxContext, account: LinkedAccount, req: GraphqlRequest): SourceAnswer {
  const profile = account.profile;
  const answer = (body: unknown): SourceAnswer => ({ status: 200, body, path: profile.nativeBase, contentType: 'application/json' });
  let doc;
  try {
    doc = new Parser(tokenize(req.query), req.variables).document();
  } catch (error) {
    return answer({ errors: [{ message: (error as Error).message }] });
  }
  if (doc.operation !== 'query') return answer({ errors: [{ message: `${doc.operation} operations are not available through this sandbox` }] });
  const resources: TopLevelResource[] = Object.keys(profile.resources).filter(isTopLevel);
  const scope = { company: 0, project: null, parent: null };
  const data: Fields = {};
  const errors: Array<{ message: string; path: string[] }> = [];
  for (const f of doc.selections) {
    const plural = resources.find((r) => nativeName(profile, r) === f.name);
    const single = resources.find((r) => nativeName(profile, r).replace(/s$/, '').replace(/ie$/, 'y') === f.name);
    if (plural) {
      const first = Math.min(Number(f.args.first ?? 50), 250);
      const skip = Number(f.args.skip ?? f.args.offset ?? 0);
      const items = ctx.dataset.list(account, plural, [scope], { offset: skip, limit: first }).items.map((x) => rawObject(profile, plural, x));
      data[f.alias] = project(items, f.selections);
    } else if (single) {
      const id = f.args.id;
      const found = id === undefined ? null : ctx.dataset.find(account, single, scope, `source_id:${asText(id)}`);
      data[f.alias] = found ? project(rawObject(profile, single, found.fields), f.selections) : null;
    } else {
      errors.push({ message: `Cannot query field "${f.name}" on type "Query".`, path: [f.alias] });
    }
  }
  return answer(errors.length ? { data, errors } : { data });
}
