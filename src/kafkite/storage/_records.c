/* The compiled twin of default_record._walk_py: a v2 batch's records read in one pass, as Kafka's
 * DefaultRecord.readFrom reads them, with no object built per record.
 *
 *   walk(buf, p, end, index, count) -> None | (p, index, min_delta, max_delta, null_keys, in_order)
 *
 * Reads records index.. of `count` that lie whole in buf[p:end]. Returns where it stopped (a record
 * not whole in the buffer, a negative length, or after the last record) with what LogValidator needs
 * from the records it read: the smallest and largest timestamp delta (INT64_MAX / INT64_MIN when it
 * read none), how many keys are null, and whether every offset delta equals the record's index.
 * Returns None at anything unusual (a field running past its record, a varint longer than Kafka
 * reads, a negative key length other than -1, a negative header count or header key length, fields
 * that do not add up to the record's length): the pure-Python exact reading then says what, with
 * Kafka's message. Only records Kafka's readFrom accepts pass; it may say None where Kafka accepts
 * (the exact reading then accepts them), never the reverse.
 *
 * Optional: setup.py builds it when a C compiler is there; default_record.py falls back to the pure
 * Python walk when it is missing (KAFKITE_PURE_PYTHON=1 forces that). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  /* Linux 5.14 */
#endif

/* ByteUtils.readVarint / readVarlong without the zig-zag: the unsigned value kept to 32 / 64 bits.
 * Returns the bytes read, 0 when the input ends first, -1 past `max_bytes` ("Varint is too long"). */
static inline int
uvarint(const uint8_t *b, Py_ssize_t p, Py_ssize_t end, int max_bytes, uint64_t *out)
{
    uint64_t value = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p + i >= end)
            return 0;
        uint8_t c = b[p + i];
        value |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            *out = value;
            return i + 1;
        }
        shift += 7;
    }
    return -1;
}

static inline int32_t
zz32(uint64_t v)
{
    uint32_t u = (uint32_t)v;
    return (int32_t)((u >> 1) ^ (uint32_t)(-(int32_t)(u & 1)));
}

static inline int64_t
zz64(uint64_t u)
{
    return (int64_t)((u >> 1) ^ (uint64_t)(-(int64_t)(u & 1)));
}

/* a signed 32-bit varint field inside the record; jumps to `bad` when it does not end inside it */
#define VARINT32(dst)                                              \
    do {                                                           \
        uint64_t u_;                                               \
        int n_ = uvarint(b, q, rec_end, 5, &u_);                   \
        if (n_ <= 0)                                               \
            goto bad;                                              \
        q += n_;                                                   \
        (dst) = zz32(u_);                                          \
    } while (0)

static PyObject *
walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t p, end, index, count;
    if (!PyArg_ParseTuple(args, "y*nnnn", &view, &p, &end, &index, &count))
        return NULL;
    if (p < 0 || end > view.len || p > end || index < 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const uint8_t *b = (const uint8_t *)view.buf;
    int64_t min_d = INT64_MAX, max_d = INT64_MIN;
    Py_ssize_t null_keys = 0;
    int in_order = 1, ok = 1;
    PyThreadState *ts = NULL;
    if (end - p > (1 << 16))  /* a long walk lets other threads run */
        ts = PyEval_SaveThread();
    while (index < count) {
        uint64_t u;
        int n = uvarint(b, p, end, 5, &u);
        if (n == 0)
            break;  /* the length runs past the buffer */
        if (n < 0)
            goto bad;
        int32_t size = zz32(u);
        if (size < 0 || size > end - p - n)
            break;  /* negative, or the record runs past the buffer */
        Py_ssize_t q = p + n, rec_end = q + size;
        int32_t od, k, v, h;
        if (q >= rec_end)
            goto bad;
        q++;  /* attributes */
        n = uvarint(b, q, rec_end, 10, &u);
        if (n <= 0)
            goto bad;
        q += n;
        int64_t d = zz64(u);
        VARINT32(od);
        VARINT32(k);
        if (k == -1)
            null_keys++;
        else if (k < 0 || k > rec_end - q)
            goto bad;
        else
            q += k;
        VARINT32(v);
        if (v >= 0) {
            if (v > rec_end - q)
                goto bad;
            q += v;
        }
        VARINT32(h);
        if (h < 0 || h > rec_end - q)
            goto bad;
        for (int32_t i = 0; i < h; i++) {
            int32_t hk, hv;
            VARINT32(hk);
            if (hk < 0 || hk > rec_end - q)
                goto bad;
            q += hk;
            VARINT32(hv);
            if (hv >= 0) {
                if (hv > rec_end - q)
                    goto bad;
                q += hv;
            }
        }
        if (q != rec_end)
            goto bad;
        if (d < min_d)
            min_d = d;
        if (d > max_d)
            max_d = d;
        if (od != index)
            in_order = 0;
        p = rec_end;
        index++;
    }
    goto done;
bad:
    ok = 0;
done:
    if (ts != NULL)
        PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    if (!ok)
        Py_RETURN_NONE;
    return Py_BuildValue("(nnLLnO)", p, index, (long long)min_d, (long long)max_d, null_keys,
                         in_order ? Py_True : Py_False);
}

/* copy(buf, start, end) -> bytearray(buf[start:end]), its new memory's whole pages first made present in one
 * madvise(MADV_POPULATE_WRITE) call, not faulted in one by one as the copy touches them: a produced batch's copy
 * into the log is new memory every time (an in-memory log only grows), and on this kind of machine a page fault
 * costs ~2 us a 4 KiB page, more than the copy itself (~0.1 us); one call for all the pages takes a third off that.
 * Where the kernel lacks it (EINVAL) the copy faults them in as bytearray() would. */
static PyObject *
copy(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &start, &end))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "copy: bounds outside the buffer");
        return NULL;
    }
    Py_ssize_t n = end - start;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *dst = PyByteArray_AS_STRING(out);
    static long page = 0;
    if (page == 0)
        page = sysconf(_SC_PAGESIZE);
    if (n >= 4 * page) {
        uintptr_t a = ((uintptr_t)dst + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t e = ((uintptr_t)dst + n) & ~(uintptr_t)(page - 1);
        if (e > a)
            (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);  /* a failure only leaves the faults to memcpy */
    }
    memcpy(dst, (const char *)view.buf + start, n);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "walk(buf, p, end, index, count): see _records.c"},
    {"copy", copy, METH_VARARGS, "copy(buf, start, end) -> bytearray of buf[start:end]: see _records.c"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__records(void)
{
    return PyModule_Create(&module);
}
