/* pick.c: the one rule by which every tool chooses the frame it reads when
 * no option names it (pick.h). One place, so that tq-cat, tq-simmat,
 * tq-attend and tq-score agree and say the same under -v. */
#include "pick.h"
#include "internal.h"
#include "quant/quant.h"

/* f is rank 2 codes: a code dtype, or int8/uint8 with a side frame of its
 * name among the n frames looked at. */
static int is_codes(const tq_reader *r, size_t n, const tq_frame *f)
{
    if (f->rank != 2)
        return 0;
    if (f->dtype == TQ_DTYPE_Q8_0 || f->dtype == TQ_DTYPE_Q4_0 || f->dtype == TQ_DTYPE_BIT ||
        f->dtype == TQ_DTYPE_Q2)
        return 1;
    if (f->dtype != TQ_DTYPE_I8 && f->dtype != TQ_DTYPE_U8)
        return 0;
    char stem[TQ_MAX_NAME + 1];
    for (size_t i = 0; i < n; i++)
        if (tq_quant_side_stem(tq_reader_ahead(r, i), stem) && !strcmp(stem, f->name))
            return 1;
    return 0;
}

static int fits(const tq_pick *p, const tq_reader *r, size_t n, const tq_frame *f)
{
    /* NAME_scale and NAME_ranges belong to the codes NAME (tq-quantize): a
     * tool that reads codes never reads them alone */
    if (p->codes && tq_quant_side_stem(f, NULL))
        return 0;
    if (p->codes && is_codes(r, n, f))
        return 1;
    return f->rank >= p->rank_lo && f->rank <= p->rank_hi && (!p->kind || p->kind(f->dtype));
}

tq_status tq_pick_frame(tq_reader *r, tq_pick *p)
{
    p->name[0] = p->why[0] = 0;
    if (p->given) {
        snprintf(p->name, sizeof p->name, "%s", p->given);
        snprintf(p->why, sizeof p->why, "named by %s", p->option);
        return TQ_OK;
    }
    size_t n;
    tq_status st = tq_reader_lookahead(r, &n);
    if (st)
        return st;
    const tq_frame *one = NULL;
    size_t count = 0;
    char list[200] = "";
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const tq_frame *f = tq_reader_ahead(r, i);
        if (p->def && !strcmp(f->name, p->def)) {
            snprintf(p->name, sizeof p->name, "%s", p->def);
            snprintf(p->why, sizeof p->why, "its default name");
            return TQ_OK;
        }
        if (!fits(p, r, n, f))
            continue;
        one = f;
        count++;
        if (len < sizeof list - 1) /* a long list ends in "..." */
            len += (size_t)snprintf(list + len, sizeof list - len, "%s\"%s\"", count > 1 ? ", " : "",
                                    f->name);
    }
    if (len >= sizeof list - 1)
        memcpy(list + sizeof list - 4, "...", 4);
    if (count == 1) {
        snprintf(p->name, sizeof p->name, "%s", one->name);
        snprintf(p->why, sizeof p->why, "the only %s frame%s%s%s", p->fits,
                 p->def ? "; none is named \"" : "", p->def ? p->def : "", p->def ? "\"" : "");
        return TQ_OK;
    }
    if (count == 0) {
        snprintf(p->why, sizeof p->why, "no %s frame", p->fits);
        return TQ_OK;
    }
    if (p->def)
        return tq_fail(TQ_ERR_USAGE,
                       "more than one frame could be the %s (%s, all %s) and none is named "
                       "\"%s\": name one with %s",
                       p->what, list, p->fits, p->def, p->option);
    return tq_fail(TQ_ERR_USAGE, "more than one frame could be the %s (%s): name one with %s",
                   p->what, list, p->option);
}

tq_status tq_pick_path(const char *path, const char *label, tq_pick *p)
{
    if (p->given)
        return tq_pick_frame(NULL, p);
    tq_reader *r = NULL;
    tq_status st = tq_reader_open_path_as(&r, path, label);
    if (!st)
        st = tq_pick_frame(r, p);
    tq_reader_close(r);
    return st;
}

void tq_took_say(const tq_took *t, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "%s: frame \"%s\" [", t->what, t->name);
    for (int i = 0; i < t->rank && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? " x " : "", (long long)t->dims[i]);
    if (len < n)
        snprintf(buf + len, n - len, "] from %s", t->from);
}

tq_status tq_took_same_width(const tq_took *a, const tq_took *b)
{
    int64_t wa = a->rank ? a->dims[a->rank - 1] : 0, wb = b->rank ? b->dims[b->rank - 1] : 0;
    if (wa == wb)
        return TQ_OK;
    return tq_fail(TQ_ERR_DATA,
                   "%s and %s differ in width: \"%s\" from %s has %lld values a row, \"%s\" "
                   "from %s has %lld",
                   a->what, b->what, a->name, a->from, (long long)wa, b->name, b->from,
                   (long long)wb);
}

const char *tq_took_label(const char *path)
{
    return !path || !strcmp(path, "-") ? "standard input" : path;
}
